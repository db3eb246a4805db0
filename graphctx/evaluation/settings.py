"""Settings of evaluation (the ``evaluation:`` section of a config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from graphctx.checks import AT_LEAST_ONE, NON_NEGATIVE, Range, check_own_fields
from graphctx.metrics.settings import MetricSettings
from graphctx.model.settings import GenerationSettings


@dataclass
class EvaluationSettings:
    """What ``evaluate.py`` and the validation callback run and where they write."""

    RANGES: ClassVar[dict[str, Range]] = {
        "limit": AT_LEAST_ONE,
        "bootstrap_samples": AT_LEAST_ONE,
        "callback_every_n_validations": NON_NEGATIVE,
        "callback_examples": AT_LEAST_ONE,
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

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
    bootstrap_samples: int = 1000
    """Resamples for the 95% bootstrap intervals and the paired test."""
    seed: int = 0
    """Seed of the bootstrap."""
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    metrics: MetricSettings = field(default_factory=MetricSettings)
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
    callback_metrics: list[str] = field(
        default_factory=lambda: ["rouge", "bertscore", "fact_score", "entity_jaccard"]
    )
    """During training: what the callback computes, from ``rouge``, ``bertscore``, ``fact_score``,
    ``entity_jaccard`` and ``autoais``. AutoAIS is left out unless named: the paper's judge (T5-XXL, ~22 GB
    in bf16) would load on rank 0 mid-training; ``evaluate.py`` always computes every metric."""
    callback_device: str = "cpu"
    """During training: device of the callback's scorers (BERTScore encoder, AutoAIS judge), loaded once on
    rank 0; the answers come from the training model on its own device."""
