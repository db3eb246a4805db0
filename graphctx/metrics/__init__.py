"""Evaluation metrics as torchmetrics ``Metric``s (DDP-safe, per-row scores kept) and result statistics.

Names are imported on first use, so ``graphctx.metrics.settings`` (read by the config loader) stays cheap
to import and the model libraries load only when a metric is built.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AutoAIS": "autoais",
    "AutoAISSettings": "settings",
    "BertScoreF1": "bertscore",
    "BertScoreSettings": "settings",
    "CausalLMJudge": "judges",
    "EntailmentJudge": "judges",
    "EntityJaccard": "facts",
    "FactSummExtractor": "factsumm",
    "FactSummScore": "factsumm",
    "SpacyEntities": "facts",
    "UniNEREntities": "uniner",
    "FactScore": "facts",
    "FactSettings": "settings",
    "Interval": "stats",
    "MetricSettings": "settings",
    "PairedComparison": "stats",
    "RougeF1": "rouge",
    "RougeSettings": "settings",
    "RowScoreMetric": "base",
    "T5NliJudge": "judges",
    "bootstrap_interval": "stats",
    "build_judge": "judges",
    "build_scorer": "bertscore",
    "nli_input": "judges",
    "paired_test": "stats",
    "unlike_paper": "paper_settings",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
