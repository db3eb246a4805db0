"""Settings of evaluation (the ``evaluation:`` section of a config), beside ``graphctx/evaluation/``: a layer
below the pipeline, whose run config holds them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from graphctx.checks import AT_LEAST_ONE, NON_NEGATIVE, Range, check_own_fields
from graphctx.metrics.registry import built_in_classes
from graphctx.metrics.settings import MetricSettings
from graphctx.prompts import VARIANTS

TEXT_TWINS: dict[str, str] = {
    "Base-GraphGen": "Base-TextGen",
    "Base-GraphContextGen": "Base-TextContextGen",
    "GraphGen": "TextGen",
    "GraphContextGen": "TextContextGen",
    "OnlyContextGen-Graph": "OnlyContextGen-Text",
}
"""Each graph variant and its text twin: the same prompt with cosine instead of graph retrieval."""


def comparisons_text(comparisons: dict[str, str] = TEXT_TWINS) -> str:
    """The paired tests in words, ``Base-GraphGen vs Base-TextGen; ...``: what evaluate.py --help and
    docs/commands/evaluate.md say the default table tests (tests/test_docs.py holds them to it)."""
    return "; ".join(f"{variant} vs {baseline}" for variant, baseline in comparisons.items())


def callback_default() -> list[str]:
    """The built-in metrics that compare an answer with its gold answer (not the context judges)."""
    return [cls.name for cls in built_in_classes() if not cls.premise]


@dataclass
class EvaluationSettings:
    """What ``evaluate.py`` and the validation callback run and where they write."""

    RANGES: ClassVar[dict[str, Range]] = {
        "limit": AT_LEAST_ONE,
        "bootstrap_samples": AT_LEAST_ONE,
        "permutation_samples": AT_LEAST_ONE,
        "callback_every_n_validations": NON_NEGATIVE,
        "callback_examples": AT_LEAST_ONE,
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

    @staticmethod
    def consistency(value: Any) -> list[tuple[str, str]]:
        """A comparison naming an unknown variant, or a variant compared with itself."""
        pairs = dict(value.comparisons or {})
        unknown = sorted({name for pair in pairs.items() for name in pair if name not in VARIANTS})
        if unknown:
            return [("comparisons", f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")]
        same = sorted(name for name, baseline in pairs.items() if name == baseline)
        return [("comparisons", f"{same} compared with itself")] if same else []

    variants: list[str] | None = None
    """Variants to run (names in ``graphctx.prompts.VARIANTS``, or the baselines of
    ``graphctx.prompts.BASELINE_VARIANTS``, which run only when named); null = every ``VARIANTS`` one."""
    split: str = "test"
    """Dataset split that is evaluated."""
    limit: int | None = None
    """Evaluate only the first N questions of the split (by id); null = all."""
    adapter: str | None = None
    """Folder of the trained peft adapter; null = ``<trainer.default_root_dir>/adapter``."""
    genqa_model: str | None = None
    """Folder of the trained GenQA baseline (``graphctx genqa`` writes it); null =
    ``<trainer.default_root_dir>/genqa``."""
    output_dir: str | None = None
    """Predictions JSONL per variant and the results tables go here; null =
    ``<trainer.default_root_dir>/eval``."""
    retrieval_eval_dir: str | None = None
    """``graphctx retrieval-eval``'s report (results.md, .csv, .json, sweep.png) goes here; null =
    ``<trainer.default_root_dir>/retrieval_eval``."""
    bootstrap_samples: int = 1000
    """Resamples for the 95% bootstrap intervals (of each mean and of each paired difference)."""
    permutation_samples: int = 10000
    """Random sign flips of each paired permutation test (exact when the rows allow fewer): its p-value
    cannot go below about 1 / (this + 1)."""
    comparisons: dict[str, str] = field(default_factory=lambda: dict(TEXT_TWINS))
    """The paired tests of the table, fixed before scoring: variant -> the baseline it is compared with
    (default: each graph variant with its text twin). A pair with a variant not run is left out; the
    p-values are Holm-corrected across the table's comparisons (pairs × metrics)."""
    seed: int = 0
    """Seed of the bootstrap."""
    metrics: MetricSettings = field(default_factory=MetricSettings)
    attribution: list[dict[str, Any]] = field(default_factory=list)
    """Attributed QA (Bohnet et al., 2022), an extension beyond the paper: each answer's attribution, one
    passage of the corpus (pool posts ``post:<id>``, KG sentences), per architecture, each
    ``{class_path: rtr | posthoc | autoais_rerank | pkg.mod.Class, init_args: {...}}`` (``posthoc`` and
    ``autoais_rerank``: ``retriever``, default ``dense``, and ``k``, default 50); the prediction lines gain
    ``attributions`` and results.md an Attribution section (:mod:`graphctx.evaluation.attribution`). Empty:
    none (the answers' fingerprint is then as before)."""
    wandb_project: str | None = "graphctx"
    """W&B project the results are logged to; null: no W&B logging."""
    wandb_mode: Literal["offline", "online"] = "offline"
    """``offline`` writes the run under ``output_dir/wandb`` (``wandb sync`` uploads it later)."""
    callback_every_n_validations: int = 1
    """During training: generate and score every N validation runs (0 disables the callback)."""
    callback_examples: int = 8
    """During training: size of the fixed validation subset that is generated and scored."""
    callback_variant: str = "FineTuned"
    """During training: the prompt variant used by the callback."""
    callback_metrics: list[str] = field(default_factory=lambda: callback_default())
    """During training: what the callback computes, from ``rouge``, ``bertscore``, ``fact_score``,
    ``entity_jaccard`` and ``autoais``. AutoAIS is left out unless named: the paper's judge (T5-XXL, ~22 GB
    in bf16) would load on rank 0 mid-training; ``evaluate.py`` always computes every metric."""
    callback_device: str = "cpu"
    """During training: device of the callback's scorers (BERTScore encoder, AutoAIS judge), loaded once on
    rank 0; the answers come from the training model on its own device."""
