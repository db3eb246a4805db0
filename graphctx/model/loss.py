"""Cross-entropy on answer tokens only, without materialising full-vocabulary logits for the batch."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

IGNORE_INDEX = -100


def _chunk_loss_sum(lm_head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(lm_head(hidden).float(), targets, reduction="sum")


def answer_cross_entropy_sum(
    hidden: torch.Tensor, targets: torch.Tensor, lm_head: torch.nn.Module, chunk_tokens: int = 4096
) -> tuple[torch.Tensor, int]:
    """``(sum_t -log softmax(lm_head(h_t))[y_t], n)`` over the ``n`` positions whose target is not -100.

    The sum (float32), not the mean, so that a caller can divide by the token count of a whole optimiser
    step (:class:`graphctx.model.InstructionTuner`). Only answer positions reach the LM head (prompt and pad
    positions cost nothing), in chunks of ``chunk_tokens``; each chunk's logits are recomputed in the
    backward pass, so at most ``chunk_tokens x vocab`` logits exist at once. ``hidden`` is [..., D] and
    ``targets`` the matching [...].
    """
    keep = targets != IGNORE_INDEX
    selected, labels = hidden[keep], targets[keep]
    if labels.numel() == 0:  # a zero that still reaches every parameter (DDP expects their gradients)
        return hidden.sum().float() * 0.0, 0
    total = hidden.new_zeros((), dtype=torch.float32)
    for start in range(0, labels.numel(), chunk_tokens):
        part = slice(start, start + chunk_tokens)
        total = total + checkpoint(
            _chunk_loss_sum, lm_head, selected[part], labels[part], use_reentrant=False
        )
    return total, labels.numel()
