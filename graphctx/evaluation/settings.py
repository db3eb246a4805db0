"""Settings of evaluation (the ``evaluation:`` section of a config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from graphctx.metrics.settings import MetricSettings


@dataclass
class GenerationSettings:
    """Batched greedy decoding of answers."""

    max_new_tokens: int = 128
    """Most tokens generated per answer."""
    batch_size: int = 8
    """Prompts decoded together, longest first, so a batch holds prompts of similar length (H200 with a
    7B model: 64-128)."""
    max_prompt_tokens: int = 1536
    """Prompts longer than this drop knowledge sentences from the end, then pairs from the lowest rank;
    never the question or the top pair (when those alone are longer, the prompt is kept over the limit and
    its prediction is flagged ``prompt_over_limit``)."""
    merge_adapter: bool = True
    """Both paths decode with the weights the adapter was trained against, as the validation callback does
    (the 4-bit NF4 base under QLoRA). True: those weights are dequantised once to ``dtype`` and the adapter is
    merged into them, W + (alpha/r)·B·A (several times faster, same model up to ``dtype`` rounding); false:
    the 4-bit base with the adapter applied on the fly. The base-model variants use the same base weights."""
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    """With ``merge_adapter``: the dtype of the merged model (the dequantised NF4 weights, or the
    ``compute_dtype`` weights of plain LoRA, are cast to it before merging); ``auto``: bfloat16 on CUDA,
    float32 on the CPU."""
    static_cache: bool = False
    """CUDA only: static KV cache and the decoding step compiled into CUDA graphs. Prompts are padded to
    multiples of ``cache_bucket_tokens`` and batches to ``batch_size`` so few shapes compile (each costs
    tens of seconds once); pays for long evaluations."""
    cache_bucket_tokens: int = 256
    """With ``static_cache``: prompt widths are rounded up to a multiple of this."""
    device: str | None = None
    """Torch device of the generating model; null: ``cuda`` when available, else ``cpu``."""


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
    output_dir: str | None = None
    """Predictions JSONL per variant and the results tables go here; null = ``<trainer.default_root_dir>/eval``."""
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
