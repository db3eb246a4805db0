"""Write the trained adapter in peft format, and optionally the base with the adapter merged in."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from graphctx.cache import atomic_path
from graphctx.model.loading import resolve_source
from graphctx.model.settings import ModelSpec

if TYPE_CHECKING:
    from peft import PeftModel


def export_adapter(model: PeftModel, tokenizer: PreTrainedTokenizerBase, target: str | Path) -> Path:
    """Save the LoRA adapter (``adapter_config.json`` + safetensors) and the tokenizer to ``target``.

    Load it back with ``PeftModel.from_pretrained(base, target)``.
    """
    with atomic_path(target) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return Path(target)


def export_merged(spec: ModelSpec, adapter_dir: str | Path, target: str | Path) -> Path:
    """Merge the adapter into an unquantised bf16 copy of the base and save it (+ tokenizer) as a plain model.

    The base is loaded without quantisation on CPU: merging into 4-bit weights would round the update away.
    """
    from peft import PeftModel

    source = resolve_source(spec)
    base = AutoModelForCausalLM.from_pretrained(source, revision=spec.revision, dtype=torch.bfloat16)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    tokenizer = AutoTokenizer.from_pretrained(str(adapter_dir))
    with atomic_path(target) as tmp:
        merged.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return Path(target)
