"""Padding-free attention: packed rows to cumulative sequence lengths, and torch's varlen flash kernel.

A packed row holds several examples back to back; ``position_ids`` restart at 0 where each one starts.
:func:`sequence_boundaries` turns that into ``cu_seqlens`` (start offsets of the examples in the flattened
tokens, plus the total), which transformers passes through the model as ``cu_seq_lens_q/k`` keyword
arguments to every attention call. :func:`varlen_attention` then runs
``torch.nn.attention.varlen.varlen_attn`` causally within each example (``window_size=(-1, 0)``): no
attention across examples and no pad slots, so the cost is sum_i L_i^2 instead of B * max_i L_i^2.
"""

from __future__ import annotations

import inspect

import torch
from transformers import AttentionInterface

VARLEN = "graphctx_varlen"


def varlen_available() -> bool:
    """True when this torch has ``torch.nn.attention.varlen.varlen_attn`` (torch >= 2.9) and CUDA."""
    try:
        from torch.nn.attention.varlen import varlen_attn  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


def resolve_attention(choice: str, device: torch.device) -> str:
    """The transformers ``attn_implementation`` for a ``ModelSpec.attention`` choice on ``device``."""
    wants_varlen = choice == "varlen" or (choice == "auto" and device.type == "cuda" and varlen_available())
    if choice == "varlen" and (device.type != "cuda" or not varlen_available()):
        raise ValueError("model.spec.attention=varlen needs CUDA and torch >= 2.9; use sdpa or auto")
    if wants_varlen:
        AttentionInterface.register(VARLEN, varlen_attention)
        return VARLEN
    return "sdpa" if choice == "auto" else choice


def sequence_boundaries(position_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``(cu_seqlens, max_len)`` of the examples in ``position_ids`` flattened row after row.

    An example starts wherever the position is 0; ``cu_seqlens`` (int32) holds those offsets and the total
    token count, so example i spans ``cu_seqlens[i]:cu_seqlens[i+1]``.
    """
    flat = position_ids.reshape(-1)
    starts = torch.nonzero(flat == 0).flatten()
    total = torch.tensor([flat.numel()], device=flat.device)
    cu_seqlens = torch.cat([starts, total]).to(torch.int32)
    return cu_seqlens, int((cu_seqlens[1:] - cu_seqlens[:-1]).max())


def varlen_keyword_arguments(position_ids: torch.Tensor) -> dict[str, torch.Tensor | int]:
    """Keyword arguments that carry the example boundaries through a transformers model's forward."""
    cu_seqlens, max_len = sequence_boundaries(position_ids)
    return {
        "cu_seq_lens_q": cu_seqlens,
        "cu_seq_lens_k": cu_seqlens,
        "max_length_q": max_len,
        "max_length_k": max_len,
    }


def _varlen_supports_gqa() -> bool:
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return False
    return "enable_gqa" in inspect.signature(varlen_attn).parameters


VARLEN_GQA = _varlen_supports_gqa()
"""Whether ``varlen_attn`` takes ``enable_gqa`` (decided at import, outside any compiled region)."""


def varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: causal attention within each packed example.

    ``query`` is [1, H, T, D] and ``key``/``value`` are [1, H_kv, T, D] (one packed row); the result is
    [1, T, H, D] as transformers expects. Needs ``cu_seq_lens_q`` and ``max_length_q`` in ``kwargs``
    (:func:`varlen_keyword_arguments`), or derives them from ``position_ids``.
    """
    from torch.nn.attention.varlen import varlen_attn

    if query.shape[0] != 1 or attention_mask is not None:
        raise ValueError("varlen attention takes one packed row without attention_mask (see remove_padding)")
    if dropout:
        raise ValueError("varlen attention has no attention dropout; set the model's attention_dropout to 0")
    if "cu_seq_lens_q" in kwargs:
        cu_seqlens, max_len = kwargs["cu_seq_lens_q"], kwargs["max_length_q"]
    else:
        cu_seqlens, max_len = sequence_boundaries(kwargs["position_ids"])
    q, k, v = (t[0].transpose(0, 1).contiguous() for t in (query, key, value))  # [T, heads, D]
    extra = {}
    if k.shape[1] != q.shape[1]:
        if VARLEN_GQA:
            extra["enable_gqa"] = True
        else:
            groups = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    out = varlen_attn(
        q, k, v, cu_seqlens, cu_seqlens, max_len, max_len, scale=scaling, window_size=(-1, 0), **extra
    )
    return out.unsqueeze(0), None
