"""Settings of evaluation (the ``evaluation:`` section of a config)."""

from __future__ import annotations

from dataclasses import dataclass, field

from graphctx.metrics.settings import MetricSettings


@dataclass
class GenerationSettings:
    """Batched greedy decoding of answers."""

    max_new_tokens: int = 128
    """Most tokens generated per answer."""
    batch_size: int = 8
    """Prompts decoded together (sorted by length, so a batch holds prompts of similar length)."""
    max_prompt_tokens: int = 1536
    """Prompts longer than this are cut from the left of the context, never the question."""
    merge_adapter: bool = True
    """Merge the LoRA adapter into bf16/fp32 base weights before decoding (faster than 4-bit + adapter)."""


@dataclass
class EvaluationSettings:
    """What ``evaluate.py`` and the validation callback run and where they write."""

    variants: list[str] | None = None
    """Variants to run (names in ``graphctx.prompts.VARIANTS``); null = all of them."""
    split: str = "test"
    """Dataset split that is evaluated."""
    limit: int | None = None
    """Evaluate only the first N questions of the split (by id); null = all."""
    adapter: str | None = None
    """Folder of the trained peft adapter; null = ``<trainer.default_root_dir>/adapter``."""
    output_dir: str = "runs/tiny/eval"
    """Predictions JSONL per variant and the results tables go here."""
    bootstrap_samples: int = 1000
    """Resamples for the 95% bootstrap intervals and the paired test."""
    seed: int = 0
    """Seed of the bootstrap."""
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    metrics: MetricSettings = field(default_factory=MetricSettings)
    callback_every_n_validations: int = 1
    """During training: generate and score every N validation runs (0 disables the callback)."""
    callback_examples: int = 8
    """During training: size of the fixed validation subset that is generated and scored."""
    callback_variant: str = "FineTuned"
    """During training: the prompt variant used by the callback."""
