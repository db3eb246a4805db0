"""Greedy decoding of tokenised prompts by either of transformers' two engines (``generation.backend``).

* ``generate``: ``model.generate`` on left-padded batches of ``batch_size`` prompts. Every step computes all
  rows of the batch, padding included, until its longest answer ends.
* ``prefix``: the same padded batches, each prompt prefilled alone (no pads) from the longest prefix it
  shares with an earlier prompt (:mod:`graphctx.prefill`), then decoded together.
* ``continuous``: transformers' continuous batching (``model.generate_batch``): all prompts go to one
  scheduler over a paged KV cache; no pad is computed, and a finished answer's cache pages go to the next
  prompt at once.

Both decode greedily, so they give the same tokens up to floating-point rounding (tests/test_decoding.py:
token-identical on the CPU; the GPU suite checks it on the GPU). Answers generated here (graphctx's answers,
UniversalNER's entity lists, the LLM extractor's triplets) all go through :func:`greedy_new_tokens`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

Backend = Literal["generate", "prefix", "continuous"]
"""The decoding engine: ``generate`` (padded static batches), ``prefix`` (the same batches prefilled per
prompt from shared prefixes) or ``continuous`` (continuous batching)."""

CPU_PAGE_TOKENS = 64
"""Continuous batching on the CPU: tokens per KV-cache page (the cache is sized to the prompts, see
:func:`continuous_config`)."""


def until_eos(ids: Sequence[int], eos_ids: Sequence[int]) -> list[int]:
    """``ids`` through the first of ``eos_ids`` (all of them when none occurs)."""
    for position, token in enumerate(ids):
        if token in eos_ids:
            return list(ids[: position + 1])
    return list(ids)


def padded_greedy(
    model: Any,
    prompts: Sequence[list[int]],
    max_new_tokens: int,
    eos_ids: Sequence[int],
    pad_id: int,
    **generate_kwargs: Any,
) -> list[list[int]]:
    """One left-padded ``model.generate`` batch: each prompt's new token ids through its first EOS."""
    import torch  # here: reading a config (generation.backend) must not import torch

    width = max(len(ids) for ids in prompts)
    device = next(model.parameters()).device
    input_ids = torch.tensor([[pad_id] * (width - len(ids)) + list(ids) for ids in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts], device=device)
    options = {"do_sample": False, "num_beams": 1, **generate_kwargs}
    output = model.generate(
        input_ids=input_ids,
        attention_mask=mask,
        max_new_tokens=max_new_tokens,
        pad_token_id=pad_id,
        eos_token_id=list(eos_ids),
        **options,
    )
    return [until_eos(row, eos_ids) for row in output[:, width:].tolist()]


def continuous_config(model: Any, prompts: Sequence[list[int]], max_new_tokens: int) -> Any:
    """Continuous batching's cache settings: transformers' own sizing on CUDA (a share of the free memory);
    on the CPU a cache of exactly the pages the prompts and their answers need (transformers would size it
    from the host's RAM, and allocating that takes a minute), all prompts prefilled in one step."""
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    if next(model.parameters()).device.type == "cuda":
        return ContinuousBatchingConfig()
    pages = sum(math.ceil((len(ids) + max_new_tokens) / CPU_PAGE_TOKENS) for ids in prompts)
    return ContinuousBatchingConfig(
        page_size=CPU_PAGE_TOKENS,
        num_blocks=pages + 1,
        max_batch_tokens=sum(len(ids) for ids in prompts) + len(prompts),
    )


def continuous_greedy(
    model: Any, prompts: Sequence[list[int]], max_new_tokens: int, eos_ids: Sequence[int]
) -> list[list[int]]:
    """transformers' continuous batching over all ``prompts``: each one's new token ids through its first
    EOS. A prompt it fails to answer is an error (never a silently missing answer)."""
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=False,
        num_beams=1,
        eos_token_id=list(eos_ids),
        pad_token_id=eos_ids[0],
    )
    outputs = model.generate_batch(
        inputs=[list(ids) for ids in prompts],
        generation_config=config,
        continuous_batching_config=continuous_config(model, prompts, max_new_tokens),
    )
    answers = list(outputs.values())
    failed = [output.error for output in answers if output.error]
    if len(answers) != len(prompts) or failed:
        raise RuntimeError(
            f"continuous batching answered {len(answers) - len(failed)} of {len(prompts)} prompts"
            + (f": {failed[0]}" if failed else "")
        )
    return [until_eos(output.generated_tokens, eos_ids) for output in answers]


def greedy_new_tokens(
    model: Any,
    prompts: Sequence[list[int]],
    *,
    backend: Backend,
    max_new_tokens: int,
    eos_ids: Sequence[int],
    pad_id: int,
    batch_size: int,
) -> list[list[int]]:
    """Each prompt's greedy new token ids through its first EOS, in the prompts' order: ``generate`` and
    ``prefix`` in batches of ``batch_size`` longest first (so a batch pads little), ``continuous`` all at
    once."""
    if not prompts:
        return []
    if backend == "continuous":
        return continuous_greedy(model, prompts, max_new_tokens, eos_ids)
    cache = None
    if backend == "prefix":
        from graphctx.prefill import PrefixCache, prefilled

        cache = PrefixCache()
    order = sorted(range(len(prompts)), key=lambda i: (-len(prompts[i]), i))
    answers: list[list[int]] = [[] for _ in prompts]
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        rows = [prompts[i] for i in batch]
        past = {"cache": prefilled(model, rows, cache)} if cache is not None else {}
        decoded = padded_greedy(model, rows, max_new_tokens, eos_ids, pad_id, **past)
        for index, ids in zip(batch, decoded, strict=True):
            answers[index] = ids
    return answers
