"""Loading the model that generates answers: the released base, or the trained base with its adapter
(merged into the weights it was trained against, or applied on the fly)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Literal

import torch
from safetensors import SafetensorError, safe_open
from transformers import PreTrainedModel

from graphctx.errors import ConfigError
from graphctx.generation.settings import GenerationSettings
from graphctx.model.loading import dequantized, load_base_model
from graphctx.model.settings import ModelSpec


def resolve_device(settings: GenerationSettings) -> torch.device:
    """``settings.device``, else CUDA when available, else the CPU."""
    return torch.device(settings.device or ("cuda" if torch.cuda.is_available() else "cpu"))


def native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this CPU multiplies bfloat16 in hardware: AVX512-BF16 or AMX-BF16 among its flags (Linux's
    ``/proc/cpuinfo``; elsewhere False). Without them oneDNN emulates bfloat16, slower than float32."""
    try:
        flags = next(line for line in cpuinfo.read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return False
    return bool({"avx512_bf16", "amx_bf16"} & set(flags.split()))


def resolve_dtype(settings: GenerationSettings, device: torch.device) -> torch.dtype:
    """``settings.dtype``; ``auto`` is bfloat16 on CUDA and float32 on the CPU; ``fastest`` is bfloat16 on
    CUDA and on a CPU that has bfloat16 instructions (:func:`native_bf16`), else float32."""
    if settings.dtype in ("auto", "fastest"):
        fast = device.type == "cuda" or (settings.dtype == "fastest" and native_bf16())
        return torch.bfloat16 if fast else torch.float32
    return getattr(torch, settings.dtype)


_LORA_WEIGHT = re.compile(r"^base_model\.model\.(.+)\.lora_([AB])\.weight$")


def check_adapter(model: PreTrainedModel, adapter_dir: Path) -> None:
    """Refuse an adapter that was not trained on ``model``: every LoRA weight in its safetensors file must
    belong to a linear layer of the base with the same widths (else peft fails with one size mismatch per
    tensor)."""
    weights = adapter_dir / "adapter_model.safetensors"
    if not weights.is_file():
        return
    try:
        with safe_open(str(weights), framework="pt") as tensors:
            shapes = {name: tensors.get_slice(name).get_shape() for name in tensors.keys()}  # noqa: SIM118
    except SafetensorError as error:
        raise ConfigError(
            f"evaluation.adapter: cannot read the adapter weights {weights} ({error})"
        ) from error
    trained_on = json.loads((adapter_dir / "adapter_config.json").read_text()).get("base_model_name_or_path")
    modules = dict(model.named_modules())
    for name, shape in shapes.items():
        match = _LORA_WEIGHT.match(name)
        if match is None:
            continue
        module = modules.get(match.group(1))
        widths = (getattr(module, "in_features", None), getattr(module, "out_features", None))
        if widths[0] is None:
            layer = "the base has no such linear layer"
        elif (shape[1] if match.group(2) == "A" else shape[0]) != widths[match.group(2) == "B"]:
            layer = f"the base's layer is {widths[0]}→{widths[1]}"
        else:
            continue
        raise ConfigError(
            f"evaluation.adapter: {adapter_dir} was trained on another base model ({trained_on!r}; this "
            f"base is {model.config.name_or_path!r}): {name} has shape {list(shape)}, {layer}"
        )


BaseWeights = Literal["released", "trained"]
"""The weights a base model decodes with: ``released`` (the checkpoint as published, cast to the generation
dtype) or ``trained`` (the weights the adapter was trained against: the dequantised NF4 base under QLoRA)."""


def load_generation_model(
    spec: ModelSpec,
    adapter_dir: str | Path | None,
    settings: GenerationSettings,
    device: torch.device | str | None = None,
    weights: BaseWeights = "trained",
) -> PreTrainedModel:
    """The model that answers: the base of ``spec``, and the adapter in ``adapter_dir`` if given.

    ``weights="released"`` (no adapter only): the checkpoint as published, unquantised, in
    :func:`resolve_dtype` (the base rows and the LLM extractor decode Llama-2 as released).

    ``weights="trained"``: the base as in training (:func:`load_base_model`: 4-bit NF4 when
    ``spec.quantization`` is ``nf4``), so the adapter computes with the weights it was trained against (the
    validation callback decodes the same 4-bit model + adapter):

    * ``settings.merge_adapter``: each NF4 weight is dequantised once by transformers' ``dequantize``,
      W = level[code] · absmax of its block of 64 (what every 4-bit matmul computes on the fly), the model
      is cast to :func:`resolve_dtype`, and the adapter is merged: W' = W + (alpha/r)·B·A. Merging into the
      original unquantised weights instead would score weights the adapter never saw.
    * otherwise the 4-bit base is kept and the adapter is applied on the fly.
    """
    device = torch.device(device) if device is not None else resolve_device(settings)
    if weights == "released" and adapter_dir is not None:
        raise ValueError("an adapter decodes with the weights it was trained against, not the released ones")
    if adapter_dir is not None and not (Path(adapter_dir) / "adapter_config.json").is_file():
        raise ConfigError(
            f"evaluation.adapter: no trained adapter in {adapter_dir} (adapter_config.json missing); "
            "train first or point evaluation.adapter at the exported adapter folder"
        )
    if weights == "released":
        dtype = str(resolve_dtype(settings, device)).removeprefix("torch.")
        released = replace(spec, attention="sdpa", quantization="none", compute_dtype=dtype)  # type: ignore[arg-type]
        model = load_base_model(released, device)
        model.config.use_cache = True
        return model.eval()
    from peft import PeftModel  # here: peft imports bitsandbytes, slow and noisy

    model = load_base_model(replace(spec, attention="sdpa"), device)
    if adapter_dir is not None:
        check_adapter(model, Path(adapter_dir))
    if settings.merge_adapter:
        dtype = resolve_dtype(settings, device)
        model = dequantized(model, spec, dtype)
        if adapter_dir is not None:
            model = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    elif adapter_dir is not None:
        model = PeftModel.from_pretrained(model, str(adapter_dir))
    model.config.use_cache = True
    return model.eval()
