"""QLoRA instruction tuning: model loading, the LightningModule, adapter export."""

from graphctx.model.loading import attach_lora, load_base_model, load_tokenizer, resolve_source
from graphctx.model.module import InstructionTuner
from graphctx.model.settings import (
    ExportSettings,
    LoraSettings,
    ModelSpec,
    OptimizerSettings,
    TinyLlamaSettings,
)

__all__ = [
    "ExportSettings",
    "InstructionTuner",
    "LoraSettings",
    "ModelSpec",
    "OptimizerSettings",
    "TinyLlamaSettings",
    "attach_lora",
    "load_base_model",
    "load_tokenizer",
    "resolve_source",
]
