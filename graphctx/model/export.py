"""Write the trained adapter in peft format, and optionally the base with the adapter merged in (by default
into the dequantised NF4 base: the model evaluate.py scores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from graphctx.cache import atomic_path
from graphctx.model.loading import dequantized, load_base_model, resolve_source
from graphctx.model.settings import MergeBase, ModelSpec

if TYPE_CHECKING:
    from peft import PeftModel


def export_adapter(
    model: PeftModel,
    tokenizer: PreTrainedTokenizerBase,
    target: str | Path,
    base_model: str | None = None,
    card: str | None = None,
) -> Path:
    """Save the LoRA adapter (``adapter_config.json`` + safetensors) and the tokenizer to ``target``;
    ``base_model``: the id ``adapter_config.json`` names (peft writes the folder the base was read from, a
    cache path for a converted GGUF); ``card``: README.md (peft writes an empty template).

    Load it back with ``PeftModel.from_pretrained(base, target)``.
    """
    with atomic_path(target) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if base_model is not None:
            config_file = Path(tmp) / "adapter_config.json"
            config = json.loads(config_file.read_text())
            config["base_model_name_or_path"] = base_model
            config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        if card is not None:
            (Path(tmp) / "README.md").write_text(card)
    return Path(target)


def export_merged(
    spec: ModelSpec, adapter_dir: str | Path, target: str | Path, base: MergeBase = "trained"
) -> Path:
    """Merge the adapter into a bf16 copy of the base, W' = W + (alpha/r)·B·A, and save it (+ tokenizer) as a
    plain model.

    ``base="trained"``: W is the base the adapter was trained against, loaded as in training (4-bit NF4
    under QLoRA, quantised on CUDA when there is one) and dequantised once to bf16: the merge evaluate.py
    decodes and scores (with ``generation.dtype`` bfloat16, its default on CUDA).
    ``base="released"``: W is the original unquantised bf16 checkpoint (weights the adapter never saw).
    """
    from peft import PeftModel

    if base == "trained":
        device = "cuda" if torch.cuda.is_available() else "cpu"
        model = dequantized(load_base_model(spec, device), spec, torch.bfloat16).cpu()
    else:
        source = resolve_source(spec)
        model = AutoModelForCausalLM.from_pretrained(source, revision=spec.revision, dtype=torch.bfloat16)
    merged = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    merged.config.use_cache = True
    tokenizer = AutoTokenizer.from_pretrained(str(adapter_dir))
    with atomic_path(target) as tmp:
        merged.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return Path(target)
