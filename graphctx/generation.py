"""Batched greedy generation of answers, and loading the model that generates them.

Speed comes from three things (``benchmarks/generate_throughput.py`` measures them against plain
``model.generate`` on the 4-bit model):

* the adapter merged into the base weights it was trained against (under QLoRA the NF4 weights, dequantised
  once to bf16 on CUDA): one plain matmul per linear layer instead of a 4-bit dequantisation plus two LoRA
  matmuls;
* prompts sorted by length and decoded in large left-padded batches, so a batch wastes little on pads and
  every decoding step reads the weights once for many answers;
* optionally on CUDA, a static KV cache with the decoding step compiled into CUDA graphs
  (``static_cache``); prompt lengths and batch sizes are rounded up to fixed buckets so that only a few
  shapes are ever compiled.

Base-model prompts are few-shot text, so a base model that does not stop goes on to write the next
``Question:`` block: answers end at EOS, at the first of the variant's stop strings
(:attr:`graphctx.prompts.Variant.stop_strings`, matched by transformers' ``StopStringCriteria`` after each
step, in every row of a batch separately), or at ``max_new_tokens``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import torch
from safetensors import SafetensorError, safe_open
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase
from transformers.generation.configuration_utils import CompileConfig

from graphctx.errors import ConfigError
from graphctx.model.loading import dequantized, load_base_model
from graphctx.model.settings import GenerationSettings, ModelSpec
from graphctx.prompts import EncodedPrompt, Prompt, encode_prompt


def resolve_device(settings: GenerationSettings) -> torch.device:
    """``settings.device``, else CUDA when available, else the CPU."""
    return torch.device(settings.device or ("cuda" if torch.cuda.is_available() else "cpu"))


def resolve_dtype(settings: GenerationSettings, device: torch.device) -> torch.dtype:
    """``settings.dtype``; ``auto`` is bfloat16 on CUDA and float32 on the CPU."""
    if settings.dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
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


def load_generator(
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


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of ``batch_size``, longest prompts first (ties by index).

    Sorting keeps prompts of similar length together, so left padding wastes few slots; longest first
    makes an out-of-memory batch fail at once rather than at the end of a long run.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


StopReason = Literal["eos", "stop_string", "length", "no_llm"]
"""How an answer ended; ``no_llm``: a baseline of ``graphctx.baselines`` made it, nothing was decoded."""
"""How an answer ended: EOS, one of the stop strings, or ``max_new_tokens``."""


@dataclass(frozen=True)
class Answer:
    """One decoded answer and how it ended."""

    text: str
    """The new text, stripped; with ``stop == "stop_string"`` it ends before the stop string."""
    token_ids: list[int]
    """The new token ids: through EOS (``eos``); the tokens that end before the stop string starts
    (``stop_string``: a token that straddles its start is dropped, its part before the stop string, in
    practice a newline, stays in the text before stripping); all of them (``length``)."""
    stop: StopReason


@dataclass(frozen=True)
class Generated(Answer):
    """An answer to a :class:`Prompt`, with the prompt as it was encoded (see :class:`EncodedPrompt`)."""

    prompt_tokens: int
    truncated: bool
    """Whether context parts were dropped to fit ``max_prompt_tokens``."""
    over_limit: bool
    """Whether the question and top pair alone exceed ``max_prompt_tokens`` (kept whole, over it)."""
    prompt: Prompt
    """The prompt as encoded: the given one less the context parts dropped to fit."""


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

    def generation_config(self, stop_strings: Sequence[str]) -> GenerationConfig:
        """Greedy decoding to ``max_new_tokens``, stopping each row at EOS or at any of ``stop_strings``.

        The stop-string check runs eagerly on the generated ids after every step, outside the compiled
        forward, so it works the same with the static cache and CUDA graphs. A row that stops is filled
        with pads until the whole batch has stopped.
        """
        config = GenerationConfig(
            max_new_tokens=self.settings.max_new_tokens,
            do_sample=False,
            num_beams=1,
            pad_token_id=self.pad_id,
            eos_token_id=self.eos_ids,
            stop_strings=list(stop_strings) or None,
        )
        if self.static:
            config.cache_implementation = "static"
            config.compile_config = CompileConfig(fullgraph=True, dynamic=False, mode="reduce-overhead")
        else:
            config.disable_compile = True
        return config

    def encode(self, prompts: Sequence[Prompt]) -> list[EncodedPrompt]:
        """Each prompt's token ids, fitted to ``max_prompt_tokens`` (:func:`encode_prompt`)."""
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
    def generate_ids(self, prompts: Sequence[list[int]], *, stop_strings: Sequence[str]) -> list[Answer]:
        """Greedy answers to one batch of tokenised prompts, each cut where it ended (:meth:`answer`)."""
        input_ids, attention_mask = self._padded_batch(prompts)
        output = self.model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            generation_config=self.generation_config(stop_strings),
            tokenizer=self.tokenizer,
        )
        new_tokens = output[: len(prompts), input_ids.shape[1] :].tolist()
        return [self.answer(ids, stop_strings) for ids in new_tokens]

    def answer(self, ids: list[int], stop_strings: Sequence[str]) -> Answer:
        """The answer in one row of new token ids: cut after the first EOS; else before the first stop
        string, which is dropped with everything after it; else all of it (the length limit was hit)."""
        eos = next((i for i, token in enumerate(ids) if token in self.eos_ids), len(ids))
        body = ids[:eos]
        text = self._text(body)
        starts = [start for start in (text.find(stop) for stop in stop_strings) if start >= 0]
        if starts:
            before = text[: min(starts)]
            kept = 0
            while kept < len(body) and before.startswith(self._text(body[: kept + 1])):
                kept += 1
            return Answer(before.strip(), body[:kept], "stop_string")
        if eos < len(ids):
            return Answer(text.strip(), ids[: eos + 1], "eos")
        return Answer(text.strip(), ids, "length")

    def _text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def generate(self, prompts: Sequence[Prompt], *, stop_strings: Sequence[str]) -> list[Generated]:
        """Answers for ``prompts`` in their order, decoded in length-sorted batches; ``stop_strings``: the
        variant's (:attr:`graphctx.prompts.Variant.stop_strings`)."""
        encoded = self.encode(prompts)
        results: list[Generated | None] = [None] * len(prompts)
        for batch in length_sorted_batches([len(e.ids) for e in encoded], self.settings.batch_size):
            answers = self.generate_ids([encoded[i].ids for i in batch], stop_strings=stop_strings)
            for index, answer in zip(batch, answers, strict=True):
                fitted = encoded[index]
                text, ids, stop = answer.text, answer.token_ids, answer.stop
                results[index] = Generated(
                    text, ids, stop, len(fitted.ids), fitted.truncated, fitted.over_limit, fitted.prompt
                )
        return [r for r in results if r is not None]
