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
    before ``ModelCheckpoint`` could save that step: the last checkpoint on disk is the last good one.
    """

    def on_before_backward(
        self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor
    ) -> None:
        if bool(torch.isfinite(loss.detach()).all()):
            return
        last = getattr(trainer.checkpoint_callback, "last_model_path", "") or "none yet"
        raise TrainingDiverged(
            f"training loss is {loss.item()} at global step {trainer.global_step}: stopped before the "
            f"update; the last good checkpoint is {last}. Lower model.optimizer.lr or "
            "trainer.gradient_clip_val, then resume with --ckpt_path last."
        )
