"""What an exported adapter says about itself: the base model's id (not the local folder it was read from)
and a model card (README.md) stating how it was trained."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml

from graphctx.model.settings import SMOLLM2_GGUF, TINY_RANDOM, ModelSpec, TunerSettings

PACKAGED_IDS = {
    SMOLLM2_GGUF: "HuggingFaceTB/SmolLM2-135M-Instruct",
    TINY_RANDOM: TINY_RANDOM,
}
"""Hub id of the model a packaged ``model.spec.source`` holds (the SmolLM2 GGUF is a quantised
conversion of HuggingFaceTB/SmolLM2-135M-Instruct); ``tiny-random`` is graphctx's random Llama, no Hub
model."""


def base_model_id(spec: ModelSpec) -> str:
    """The base model as configured: a Hub id (``@revision`` when pinned), a packaged model's original id
    (:data:`PACKAGED_IDS`), or the resolved local folder or GGUF file; never the cache folder a GGUF was
    converted into."""
    if spec.source in PACKAGED_IDS:
        return PACKAGED_IDS[spec.source]
    path = Path(spec.source).expanduser()
    if path.exists():
        return str(path.resolve())
    return f"{spec.source}@{spec.revision}" if spec.revision else spec.source


def adapter_card(settings: TunerSettings, trainer: Any, data: Any | None) -> str:
    """README.md of an adapter trained by ``trainer`` (a Lightning Trainer after fit) with ``settings``, on
    the DataModule settings ``data`` (None when unknown)."""
    spec, lora = settings.spec, settings.lora
    base = base_model_id(spec)
    metadata: dict[str, Any] = {"library_name": "peft", "tags": ["graphctx", "lora"]}
    if spec.source not in (TINY_RANDOM,) and not Path(base).is_absolute():
        metadata["base_model"] = base.split("@", 1)[0]
    quantised = spec.quantization == "nf4"
    method = (
        f"QLoRA: base quantised to 4-bit NF4 (double quantisation {'on' if spec.double_quant else 'off'}), "
        f"compute dtype {spec.compute_dtype}"
        if quantised
        else f"LoRA on the unquantised base (compute dtype {spec.compute_dtype})"
    )
    optimizer = settings.optimizer
    lines = [
        "---",
        yaml.safe_dump(metadata, sort_keys=True).rstrip(),
        "---",
        "",
        f"# LoRA adapter of `{base}`, trained by graphctx",
        "",
        f"- Base model: `{base}` (graphctx `model.spec.source: {spec.source}`)",
        f"- Method: {method}",
        f"- LoRA: r {lora.r}, alpha {lora.alpha}, dropout {lora.dropout}, "
        f"target modules {', '.join(lora.target_modules)}",
        f"- Optimiser: {optimizer.name}, lr {optimizer.lr}, {optimizer.schedule} schedule, warm-up ratio "
        f"{optimizer.warmup_ratio}, weight decay {optimizer.weight_decay}",
        f"- Trained: {trainer.global_step} optimiser steps (trainer.max_steps {trainer.max_steps}, "
        f"max_epochs {trainer.max_epochs}), {trainer.accumulate_grad_batches} batch(es) per step, "
        f"{trainer.world_size} process(es), precision {trainer.precision}; loss on the answer tokens only",
    ]
    if data is not None:
        dataset = data.dataset
        lines.append(
            f"- Data: `{dataset.source}`, train split {_split(dataset)}; template {data.template}, "
            f"max_length {data.max_length}, batch size {data.batch_size}, packed {data.pack}"
        )
    lines += [
        f"- Config: the run folder's `config.yaml` (`{trainer.default_root_dir}`)",
        "",
        "Load with `PeftModel.from_pretrained(base, this_folder)`; graphctx's evaluate.py reads it as "
        "`evaluation.adapter`.",
        "",
        "```yaml",
        yaml.safe_dump({"model": json_plain(asdict(settings))}, sort_keys=False).rstrip(),
        "```",
    ]
    return "\n".join(lines) + "\n"


def _split(dataset: Any) -> str:
    split = dataset.split
    if getattr(split, "train_start", None) or getattr(split, "train_end", None):
        return f"[{split.train_start}, {split.train_end})"
    return f"fraction {split.train_fraction}"


def json_plain(value: Any) -> Any:
    """Tuples as lists, for YAML that any reader reads."""
    if isinstance(value, dict):
        return {key: json_plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_plain(item) for item in value]
    return value
