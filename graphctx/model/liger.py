"""liger-kernel's fused Triton kernels for Llama training (``model.spec.liger``), CUDA only.

Four kernels replace transformers' and graphctx's own code on the frozen base, so the LoRA adapters and the
4-bit matmuls are untouched: RMSNorm and SwiGLU (the MLP's ``down(silu(gate(x)) * up(x))``, with the three
projections still called as modules, so peft's adapters and bitsandbytes' NF4 layers run as before) are
patched on the model instance; RoPE is a module-level function in transformers' Llama code, so liger
replaces it process-wide (every Llama built afterwards in the process uses it); the fused linear
cross-entropy computes ``sum(-log softmax(h W^T)[y])`` over the answer positions in chunks, never holding
the logits, and replaces :func:`graphctx.model.loss.answer_cross_entropy_sum`.
"""

from __future__ import annotations

import importlib.util

import torch
from transformers import PreTrainedModel

from graphctx.errors import ConfigError
from graphctx.model.loss import IGNORE_INDEX
from graphctx.model.settings import ModelSpec

SUPPORTED = ("llama",)


def check_liger(spec: ModelSpec, device: torch.device) -> None:
    """Refuse ``model.spec.liger`` where it cannot run, before any weights are loaded."""
    if not spec.liger:
        return
    if device.type != "cuda":
        raise ConfigError(
            f"model.spec.liger=true needs CUDA: liger-kernel's kernels are Triton GPU kernels (device is "
            f"{device.type}); set model.spec.liger: false"
        )
    if importlib.util.find_spec("liger_kernel") is None:
        raise ConfigError(
            "model.spec.liger=true needs the liger-kernel package: pip install liger-kernel "
            "(on the GPU machine: bash scripts/gpu/install.sh)"
        )


def apply_liger(model: PreTrainedModel) -> None:
    """Patch ``model`` (a Llama causal LM, before the adapter is attached) with liger's RMSNorm, SwiGLU and
    RoPE kernels; the loss is :func:`liger_answer_cross_entropy_sum`."""
    model_type = model.config.model_type
    if model_type not in SUPPORTED:
        raise ConfigError(f"model.spec.liger=true supports {list(SUPPORTED)} models, not {model_type!r}")
    from liger_kernel.transformers import apply_liger_kernel_to_llama

    apply_liger_kernel_to_llama(
        rope=True,
        rms_norm=True,
        swiglu=True,
        cross_entropy=False,
        fused_linear_cross_entropy=False,
        model=model,
    )


def liger_answer_cross_entropy_sum(
    hidden: torch.Tensor, targets: torch.Tensor, lm_head: torch.nn.Linear
) -> tuple[torch.Tensor, int]:
    """``(sum of -log softmax(lm_head(h_t))[y_t] over the positions whose target is not -100, their number)``
    by liger's fused linear cross-entropy (only answer positions are passed in, as in
    ``answer_cross_entropy_sum``)."""
    from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

    keep = targets != IGNORE_INDEX
    count = int(keep.sum())
    if count == 0:
        return hidden.sum() * 0.0, 0
    loss = LigerFusedLinearCrossEntropyLoss(ignore_index=IGNORE_INDEX, reduction="sum")
    return loss(lm_head.weight, hidden[keep], targets[keep]), count
