"""ROUGE-1 and ROUGE-L F1, macro over answers, computed by Google's ``rouge_score``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
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


EVALUATE_ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
"""``evaluate``'s rouge types when none are given: its BootstrapAggregator resamples them in this order, all
from numpy's one random stream."""


def evaluate_mid(
    fmeasures: dict[str, Sequence[float]], seed: int, n_samples: int = 1000, confidence: float = 0.95
) -> dict[str, float]:
    """The value ``evaluate.load("rouge", seed=seed).compute(...)`` reports for each of ``fmeasures``' types:
    rouge_score's ``BootstrapAggregator`` mid, the median of ``n_samples`` bootstrap means.

    The aggregator draws ``np.random.choice(n, size=n)`` per sample, type after type in
    :data:`EVALUATE_ROUGE_TYPES` order, from numpy's global generator, which ``evaluate`` seeds with its
    ``seed`` for the call (unseeded, ``evaluate`` draws one, so its value varies between runs by the
    bootstrap's noise). A ``RandomState(seed)`` makes the same draws without touching the global one; a type
    not given (ROUGE-2) still takes its draws. Rows' F-measures must all be finite.
    """
    n = len(next(iter(fmeasures.values())))
    rng = np.random.RandomState(seed)
    q = 100 * np.array([(1 - confidence) / 2, 0.5, 1 - (1 - confidence) / 2])
    mids = {}
    for rouge_type in EVALUATE_ROUGE_TYPES:
        draws = [rng.choice(np.arange(n), size=n) for _ in range(n_samples)]
        if rouge_type in fmeasures:
            values = np.asarray(fmeasures[rouge_type], dtype=float)
            means = np.array([values[idx].mean() for idx in draws])
            mids[rouge_type] = float(np.percentile(means, q)[1])
    return mids
