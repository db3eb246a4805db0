"""AdamW (torch or bitsandbytes paged) and a warm-up + constant/cosine learning-rate schedule."""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from graphctx.errors import ConfigError
from graphctx.model.settings import OptimizerSettings


def build_optimizer(
    parameters: Iterable[torch.nn.Parameter], settings: OptimizerSettings, device: torch.device
) -> torch.optim.Optimizer:
    """The optimiser ``settings.name`` names (``auto``: paged 32-bit AdamW on CUDA, torch AdamW on CPU)."""
    name = settings.name
    if name == "auto":
        name = "paged_adamw_32bit" if device.type == "cuda" else "adamw"
    kwargs = {"lr": settings.lr, "weight_decay": settings.weight_decay, "betas": tuple(settings.betas)}
    if name == "adamw":
        return torch.optim.AdamW(parameters, **kwargs)
    if device.type != "cuda":
        raise ConfigError(f"model.optimizer.name={name} needs CUDA; use adamw (or auto) on {device.type}")
    import bitsandbytes as bnb

    paged = {"paged_adamw_32bit": bnb.optim.PagedAdamW32bit, "paged_adamw_8bit": bnb.optim.PagedAdamW8bit}
    return paged[name](parameters, **kwargs)


def build_scheduler(
    optimizer: torch.optim.Optimizer, settings: OptimizerSettings, total_steps: int
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over ``ceil(warmup_ratio * total_steps)`` steps, then constant or cosine to 0."""
    # here: transformers' optimization module imports peft (and bitsandbytes), slow and noisy
    from transformers import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    warmup = math.ceil(settings.warmup_ratio * total_steps)
    if settings.schedule == "cosine":
        return get_cosine_schedule_with_warmup(optimizer, warmup, total_steps)
    return get_constant_schedule_with_warmup(optimizer, warmup)
