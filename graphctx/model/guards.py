"""Stop training at the first non-finite loss, before it can reach the weights or a checkpoint."""

from __future__ import annotations

import lightning as L
import torch

from graphctx.errors import GraphctxError


class TrainingDiverged(GraphctxError):
    """The training loss became NaN or infinite."""


class FiniteLossGuard(L.Callback):
    """Raise :class:`TrainingDiverged` when a training loss is NaN or +-inf.

    The check runs just before the backward pass, so the bad step never updates the adapter, and it raises
    before ``ModelCheckpoint`` could save that step: the last checkpoint on disk is the last good one. Under
    DDP the ranks agree first (one all-reduce of a boolean), so all of them stop together instead of the
    healthy ones waiting forever in the gradient all-reduce.
    """

    def on_before_backward(
        self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor
    ) -> None:
        finite = bool(torch.isfinite(loss.detach()).all())
        if trainer.strategy.reduce_boolean_decision(finite, all=True):
            return
        last = getattr(trainer.checkpoint_callback, "last_model_path", "") or "none yet"
        raise TrainingDiverged(
            f"training loss is not finite (this rank: {loss.item()}) at global step {trainer.global_step}: "
            f"stopped before the update; the last good checkpoint is {last}. Lower model.optimizer.lr or "
            "trainer.gradient_clip_val, then resume with --ckpt_path last."
        )
