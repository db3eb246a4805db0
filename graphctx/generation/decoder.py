"""Batched greedy generation of answers with a loaded model (:mod:`graphctx.generation.loading` loads it).

Speed comes from three things (``benchmarks/generate_throughput.py`` measures them against plain
``model.generate`` on the 4-bit model):

* the adapter merged into the base weights it was trained against (under QLoRA the NF4 weights, dequantised
  once to bf16 on CUDA): one plain matmul per linear layer instead of a 4-bit dequantisation plus two LoRA
  matmuls;
* prompts sorted by length and decoded in large left-padded batches, so a batch wastes little on pads and
  every decoding step reads the weights once for many answers;
* optionally on CUDA, a static KV cache with the decoding step compiled into CUDA graphs
  (``static_cache``); prompt lengths and batch sizes are rounded up to fixed buckets so that only a few
  shapes are ever compiled;
* with ``backend: prefix``, each prompt of a batch prefilled alone, without pads, from the longest prefix
  it shares with an earlier prompt of the same model (:mod:`graphctx.prefill`; the variants of a question
  share most of their prompt), then the batch decoded together;
* or, with ``backend: continuous``, transformers' continuous batching (:mod:`graphctx.decoding`): no pads,
  and a finished answer's cache slot goes to the next prompt of the batch at once.

Base-model prompts are few-shot text, so a base model that does not stop goes on to write the next
``Question:`` block: answers end at EOS, at the first of the variant's stop strings
(:attr:`graphctx.prompts.Variant.stop_strings`, matched by transformers' ``StopStringCriteria`` after each
step, in every row of a batch separately), or at ``max_new_tokens``. Continuous batching knows no stop
strings: its answers run on to EOS or ``max_new_tokens`` and are cut at the stop string afterwards, the
same answer at the cost of the tokens past it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase
from transformers.generation.configuration_utils import CompileConfig

from graphctx.decoding import continuous_greedy
from graphctx.generation.settings import GenerationSettings
from graphctx.prefill import PrefixCache, prefilled
from graphctx.prompts import EncodedPrompt, Prompt, encode_prompt


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
        self.prefixes = PrefixCache()
        """With ``backend: prefix``: the keys and values of the prompts decoded so far, for reuse."""

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
        if self.settings.backend == "continuous":
            new = continuous_greedy(self.model, prompts, self.settings.max_new_tokens, self.eos_ids)
            return [self.answer(ids, stop_strings) for ids in new]
        input_ids, attention_mask = self._padded_batch(prompts)
        past = prefilled(self.model, prompts, self.prefixes) if self.settings.backend == "prefix" else None
        output = self.model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            cache=past,
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
