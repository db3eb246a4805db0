"""Evaluation metrics as torchmetrics ``Metric``s (DDP-safe, per-row scores kept) and result statistics."""

from graphctx.metrics.autoais import AutoAIS
from graphctx.metrics.base import RowScoreMetric
from graphctx.metrics.bertscore import BertScoreF1, build_scorer
from graphctx.metrics.facts import EntityJaccard, FactScore
from graphctx.metrics.judges import CausalLMJudge, EntailmentJudge, T5NliJudge, build_judge, nli_input
from graphctx.metrics.rouge import RougeF1
from graphctx.metrics.settings import (
    AutoAISSettings,
    BertScoreSettings,
    FactSettings,
    MetricSettings,
    RougeSettings,
)
from graphctx.metrics.stats import Interval, PairedComparison, bootstrap_interval, paired_test

__all__ = [
    "AutoAIS",
    "AutoAISSettings",
    "BertScoreF1",
    "BertScoreSettings",
    "CausalLMJudge",
    "EntailmentJudge",
    "EntityJaccard",
    "FactScore",
    "FactSettings",
    "Interval",
    "MetricSettings",
    "PairedComparison",
    "RougeF1",
    "RougeSettings",
    "RowScoreMetric",
    "T5NliJudge",
    "bootstrap_interval",
    "build_judge",
    "build_scorer",
    "nli_input",
    "paired_test",
]
