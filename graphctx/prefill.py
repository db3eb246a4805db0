"""Prefill without pads, from the longest prefix already computed (``generation.backend: prefix``).

A left-padded batch computes every pad position through every layer, and on the CPU the masked attention
over a padded batch costs more than the pads themselves (tiny.yaml's model, 4 real prompts of 812-1,338
tokens, one thread: 24.5 s as a padded batch, 14.1 s one prompt at a time). The variants of one question
share most of their prompt: TextGen's ``[INST]{pairs}`` opens TextContextGen's too, and the dense and graph
retrievers often rank the same top pair first. So each prompt is prefilled alone, starting from the keys and
values of the longest prefix it shares with an earlier prompt of the same model (:class:`PrefixCache`), and
the batch is then decoded together from the stacked caches (:func:`stacked_cache`), left-padded as
``generate`` pads it: pad positions hold zeros that the attention mask hides, and each row's tokens keep the
positions 0..n-1 they had alone.

The answers are those of a padded batch up to floating-point rounding (the same products summed in another
order); ``benchmarks/generation_engines.py`` counts the rows whose tokens differ.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: graphctx plan reads PREFIX_CACHE_BYTES without torch
    import torch
    from transformers import DynamicCache, PreTrainedModel

PREFIX_CACHE_BYTES = 2 * 2**30
"""Most bytes of earlier prompts' keys and values kept for reuse (tiny.yaml's model in bfloat16: about
23 KB a token, so about 90 prompts of 1,000 tokens; Llama-2-7B: 0.5 MB a token, 4 such prompts)."""

LayerKV = tuple["torch.Tensor", "torch.Tensor"]
"""One layer's keys and values of one prompt: ``[1, kv_heads, tokens, head_dim]`` each."""


def common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    """Length of the longest common prefix of two 1-D token-id tensors."""
    import torch

    n = min(len(a), len(b))
    differs = torch.nonzero(a[:n] != b[:n])
    return int(differs[0]) if len(differs) else n


class PrefixCache:
    """The keys and values of earlier prompts (all their tokens but the last), least recently used
    dropped first once they hold more than ``max_bytes``."""

    def __init__(self, max_bytes: int = PREFIX_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple[int, ...], tuple[torch.Tensor, list[LayerKV]]] = OrderedDict()
        self.bytes = 0
        self.reused_tokens = 0
        """Prompt tokens taken from the cache instead of being computed (over the cache's life)."""
        self.computed_tokens = 0

    def longest(self, ids: torch.Tensor) -> tuple[int, list[LayerKV] | None]:
        """The longest prefix of ``ids`` cached (its length and layers; 0 and None when none is)."""
        best, layers, key = 0, None, None
        for entry_key, (entry_ids, entry_layers) in self.entries.items():
            shared = common_prefix(ids, entry_ids)
            if shared > best:
                best, layers, key = shared, entry_layers, entry_key
        if key is not None:
            self.entries.move_to_end(key)
        return best, layers

    def add(self, ids: torch.Tensor, layers: list[LayerKV]) -> None:
        """Keep ``layers``, the keys and values of ``ids``, dropping the least recently used beyond the
        budget (an entry larger than the whole budget is not kept)."""
        size = sum(k.nbytes + v.nbytes for k, v in layers)
        key = tuple(ids.tolist())
        if size > self.max_bytes or key in self.entries:
            return
        self.entries[key] = (ids, layers)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self.entries.popitem(last=False)
            self.bytes -= sum(k.nbytes + v.nbytes for k, v in dropped)


def prefill(model: PreTrainedModel, ids: Sequence[int], cache: PrefixCache) -> list[LayerKV]:
    """Every layer's keys and values of ``ids[:-1]`` (the last token is left for ``generate``'s first
    step; none for a one-token prompt): the longest cached prefix, cut to the length it shares, then one
    forward pass over the rest."""
    import torch
    from transformers import DynamicCache

    tokens = torch.tensor(list(ids)[:-1], dtype=torch.long)
    if not len(tokens):
        return []
    shared, layers = cache.longest(tokens)
    past = DynamicCache()
    if layers is not None:
        past = DynamicCache(ddp_cache_data=[(k[:, :, :shared], v[:, :, :shared]) for k, v in layers])
    if shared < len(tokens):
        rest = tokens[shared:].unsqueeze(0).to(next(model.parameters()).device)
        past = model(input_ids=rest, cache=past, use_cache=True, logits_to_keep=1).cache
    cache.reused_tokens += shared
    cache.computed_tokens += len(tokens) - shared
    computed = [(layer.keys, layer.values) for layer in past.layers]
    cache.add(tokens, computed)
    return computed


def stacked_cache(rows: Sequence[list[LayerKV]]) -> DynamicCache:
    """One batch cache from per-prompt caches (at least one not empty), each left-padded with zeros to the
    longest: the batch's pads, which its attention mask hides."""
    import torch
    from transformers import DynamicCache

    reference = next(row for row in rows if row)
    width = max(row[0][0].shape[2] if row else 0 for row in rows)
    layers = []
    for layer, (empty_k, empty_v) in enumerate(reference):
        keys, values = [], []
        for row in rows:
            k, v = row[layer] if row else (empty_k[:, :, :0], empty_v[:, :, :0])
            pad = (0, 0, width - k.shape[2], 0)
            keys.append(torch.nn.functional.pad(k, pad))
            values.append(torch.nn.functional.pad(v, pad))
        layers.append((torch.cat(keys), torch.cat(values)))
    return DynamicCache(ddp_cache_data=layers)


def prefilled(
    model: PreTrainedModel, prompts: Sequence[Sequence[int]], cache: PrefixCache
) -> DynamicCache | None:
    """The batch cache of ``prompts`` less their last tokens, for ``generate`` to go on from with the
    left-padded batch (None when every prompt is a single token: nothing to prefill)."""
    rows = [prefill(model, ids, cache) for ids in prompts]
    return stacked_cache(rows) if any(rows) else None
