"""Batched greedy generation of answers, and loading the model that generates them.

Speed comes from three things (``benchmarks/generate_throughput.py`` measures them against plain
``model.generate`` on the 4-bit model):

* the adapter merged into unquantised base weights (bf16 on CUDA): one plain matmul per linear layer instead
  of a 4-bit dequantisation plus two LoRA matmuls;
* prompts sorted by length and decoded in large left-padded batches, so a batch wastes little on pads and
  every decoding step reads the weights once for many answers;
* optionally on CUDA, a static KV cache with the decoding step compiled into CUDA graphs
  (``static_cache``); prompt lengths and batch sizes are rounded up to fixed buckets so that only a few
  shapes are ever compiled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase
from transformers.generation.configuration_utils import CompileConfig

from graphctx.errors import ConfigError
from graphctx.evaluation.settings import GenerationSettings
from graphctx.model.loading import load_base_model, resolve_source
from graphctx.model.settings import ModelSpec
from graphctx.prompts import Prompt, encode_prompt


def resolve_device(settings: GenerationSettings) -> torch.device:
    """``settings.device``, else CUDA when available, else the CPU."""
    return torch.device(settings.device or ("cuda" if torch.cuda.is_available() else "cpu"))


def resolve_dtype(settings: GenerationSettings, device: torch.device) -> torch.dtype:
    """``settings.dtype``; ``auto`` is bfloat16 on CUDA and float32 on the CPU."""
    if settings.dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, settings.dtype)


def load_generator(
    spec: ModelSpec,
    adapter_dir: str | Path | None,
    settings: GenerationSettings,
    device: torch.device | str | None = None,
) -> PreTrainedModel:
    """The model that answers: the base of ``spec``, with the adapter in ``adapter_dir`` when given.

    ``settings.merge_adapter``: the base is loaded unquantised in :func:`resolve_dtype` and the adapter is
    merged into its weights (W + (alpha/r)·B·A). Otherwise the base is loaded as in training (4-bit when
    ``spec.quantization`` says so) and the adapter is applied on the fly.
    """
    device = torch.device(device) if device is not None else resolve_device(settings)
    if adapter_dir is not None and not (Path(adapter_dir) / "adapter_config.json").is_file():
        raise ConfigError(
            f"evaluation.adapter: no trained adapter in {adapter_dir} (adapter_config.json missing); "
            "train first or point evaluation.adapter at the exported adapter folder"
        )
    if settings.merge_adapter:
        model = AutoModelForCausalLM.from_pretrained(
            resolve_source(spec),
            revision=spec.revision,
            dtype=resolve_dtype(settings, device),
            attn_implementation="sdpa",
            device_map={"": device},
        )
        if adapter_dir is not None:
            model = PeftModel.from_pretrained(model, str(adapter_dir)).merge_and_unload()
    else:
        model = load_base_model(replace(spec, attention="sdpa"), device)
        if adapter_dir is not None:
            model = PeftModel.from_pretrained(model, str(adapter_dir))
    model.config.use_cache = True
    return model.eval()


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of ``batch_size``, longest prompts first (ties by index).

    Sorting keeps prompts of similar length together, so left padding wastes few slots; longest first
    makes an out-of-memory batch fail at once rather than at the end of a long run.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


@dataclass(frozen=True)
class Generated:
    """One answer: its text, the new token ids (through EOS when it stopped), and the prompt's length."""

    text: str
    token_ids: list[int]
    prompt_tokens: int
    truncated: bool = False
    """Whether the prompt had to be cut to ``max_prompt_tokens``."""


class Generator:
    """Greedy batched decoding with one model and tokenizer, following :class:`GenerationSettings`."""

    def __init__(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, settings: GenerationSettings
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.settings = settings
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        eos = model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.eos_ids = sorted({*eos, tokenizer.eos_token_id} - {None})

    @property
    def static(self) -> bool:
        """Whether the static-cache + CUDA-graph path is used (asked for, and the model is on CUDA)."""
        return self.settings.static_cache and self.model.device.type == "cuda"

    def generation_config(self) -> GenerationConfig:
        config = GenerationConfig(
            max_new_tokens=self.settings.max_new_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=self.pad_id,
            eos_token_id=self.eos_ids,
        )
        if self.static:
            config.cache_implementation = "static"
            config.compile_config = CompileConfig(fullgraph=True, dynamic=False, mode="reduce-overhead")
        else:
            config.disable_compile = True
        return config

    def encode(self, prompts: Sequence[Prompt]) -> list[tuple[list[int], bool]]:
        """Token ids of each prompt (cut to ``max_prompt_tokens``) and whether it was cut."""
        return [encode_prompt(self.tokenizer, p, self.settings.max_prompt_tokens) for p in prompts]

    def _padded_batch(self, prompts: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Left-padded ``input_ids`` and ``attention_mask``; in static mode padded to the shape buckets."""
        width = max(len(ids) for ids in prompts)
        rows = list(prompts)
        if self.static:
            bucket = self.settings.cache_bucket_tokens
            width = math.ceil(width / bucket) * bucket
            rows += [rows[-1]] * (self.settings.batch_size - len(rows))  # fixed batch size: one graph
        input_ids = torch.tensor([[self.pad_id] * (width - len(ids)) + ids for ids in rows])
        attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in rows])
        return input_ids.to(self.model.device), attention_mask.to(self.model.device)

    @torch.no_grad()  # not inference_mode: tensors cached during validation must stay usable in training
    def generate_ids(self, prompts: Sequence[list[int]]) -> list[list[int]]:
        """New token ids of one batch of prompts (greedy), cut after the first EOS."""
        input_ids, attention_mask = self._padded_batch(prompts)
        output = self.model.generate(
            input_ids=input_ids, attention_mask=attention_mask, generation_config=self.generation_config()
        )
        new_tokens = output[: len(prompts), input_ids.shape[1] :].tolist()
        return [self._until_eos(ids) for ids in new_tokens]

    def _until_eos(self, ids: list[int]) -> list[int]:
        for position, token in enumerate(ids):
            if token in self.eos_ids:
                return ids[: position + 1]
        return ids

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip()

    def generate(self, prompts: Sequence[Prompt]) -> list[Generated]:
        """Answers for ``prompts`` in their order, decoded in length-sorted batches."""
        encoded = self.encode(prompts)
        results: list[Generated | None] = [None] * len(prompts)
        for batch in length_sorted_batches([len(ids) for ids, _ in encoded], self.settings.batch_size):
            for index, ids in zip(batch, self.generate_ids([encoded[i][0] for i in batch]), strict=True):
                prompt_ids, truncated = encoded[index]
                results[index] = Generated(self.decode(ids), ids, len(prompt_ids), truncated)
        return [r for r in results if r is not None]
