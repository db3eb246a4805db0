"""ROUGE-1 and ROUGE-L F1, macro over answers, computed by Google's ``rouge_score``."""

from __future__ import annotations

from collections.abc import Sequence

from rouge_score import rouge_scorer

from graphctx.metrics.base import RowScoreMetric
from graphctx.metrics.settings import RougeSettings


class RougeF1(RowScoreMetric):
    """Per-answer ROUGE-1 and ROUGE-L F-measure (``rouge_score.RougeScorer``), reported as macro means.

    ROUGE-N F1 = 2·P·R / (P + R) with P, R the clipped n-gram overlap over the prediction's and the
    reference's n-gram counts; ROUGE-L uses the longest common subsequence instead of n-gram overlap.
    Tokens are rouge_score's (lower case, non-alphanumerics as spaces), unstemmed by default as in
    ``evaluate``'s ROUGE; ``use_stemmer`` turns on nltk's PorterStemmer (pure code: no nltk data is read).
    """

    score_states = ("rouge1", "rougeL")

    def __init__(self, settings: RougeSettings | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.settings = settings or RougeSettings()
        self.scorer = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=self.settings.use_stemmer)

    def update(self, preds: Sequence[str], targets: Sequence[str]) -> None:
        """Score each generated answer in ``preds`` against its gold answer in ``targets``."""
        if len(preds) != len(targets):
            raise ValueError(f"RougeF1: {len(preds)} predictions but {len(targets)} targets")
        scores = [self.scorer.score(target, pred) for pred, target in zip(preds, targets, strict=True)]
        self._append_rows(
            rouge1=[score["rouge1"].fmeasure for score in scores],
            rougeL=[score["rougeL"].fmeasure for score in scores],
        )
