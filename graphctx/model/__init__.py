"""QLoRA instruction tuning: model loading, the LightningModule, adapter export.

The settings import at once; the rest (torch, transformers, Lightning) on first use, so that reading a
config's settings stays fast."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphctx.model.settings import (
    ExportSettings,
    LoraSettings,
    ModelSpec,
    OptimizerSettings,
    TinyLlamaSettings,
    TunerSettings,
)

if TYPE_CHECKING:
    from graphctx.model.loading import attach_lora, load_base_model, load_tokenizer, resolve_source
    from graphctx.model.module import InstructionTuner

__all__ = [
    "ExportSettings",
    "InstructionTuner",
    "LoraSettings",
    "ModelSpec",
    "OptimizerSettings",
    "TinyLlamaSettings",
    "TunerSettings",
    "attach_lora",
    "load_base_model",
    "load_tokenizer",
    "resolve_source",
]
_LAZY = {
    "InstructionTuner": "graphctx.model.module",
    **dict.fromkeys(
        ("attach_lora", "load_base_model", "load_tokenizer", "resolve_source"), "graphctx.model.loading"
    ),
}


def __getattr__(name: str) -> Any:
    """Import the heavy parts on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
