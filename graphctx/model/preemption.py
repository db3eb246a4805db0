"""SLURM preemption: checkpoint at a step boundary, requeue the job, exit; the requeued job resumes there.

Lightning's own SIGUSR1 handler saves the HPC checkpoint from inside the signal handler, i.e. in the middle of
an optimiser step. On restart Lightning assumes the checkpoint was written at the end of a training batch and
advances its step counter by one, so every step after the resume is logged under the next step's number
(one step number missing from the logs, the last one past ``max_steps``). Here the handler only raises a
flag; the checkpoint is written in ``on_train_batch_end``, where ``ModelCheckpoint`` also saves, and the job
is requeued (and the process exits) when the next batch would start, once that step has been logged.
Resuming from it continues with the next step, logged under its own number, at the next data position.
"""

from __future__ import annotations

import os
import signal
import subprocess
from types import FrameType

import lightning as L
from lightning.fabric.plugins.environments import SLURMEnvironment
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities import rank_zero_info


def finish_wandb_runs(trainer: L.Trainer) -> None:
    """Close the W&B runs this process opened, so their files are complete and the run id is free again."""
    for logger in trainer.loggers:
        if isinstance(logger, WandbLogger) and logger._experiment is not None:
            logger.experiment.finish()


def requeue_slurm_job() -> None:
    """``scontrol requeue`` this SLURM job (an array job's own task); SLURM then ends all its processes."""
    job = os.environ["SLURM_JOB_ID"]
    if "SLURM_ARRAY_JOB_ID" in os.environ:
        job = f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
    subprocess.run(["scontrol", "requeue", job], check=True)
    rank_zero_info(f"graphctx: requeued SLURM job {job}")


class RequeueAtStepBoundary(Checkpoint):
    """On ``signum`` (SLURM's ``--signal=USR1@<s>`` or ``scancel --signal=USR1``) under SLURM: finish and log
    the running step, save ``<default_root_dir>/hpc_ckpt_<n>.ckpt``, ``scontrol requeue`` the job and exit.

    The handler is installed in ``setup``, before Lightning installs its own, which then stands aside. Ranks
    agree on the flag each step (one all-reduce of a boolean), so all of them stop at the same step.

    It must run after every ``ModelCheckpoint`` of the trainer: the HPC checkpoint holds their state, and a
    ``ModelCheckpoint`` that saved ``last.ckpt`` at this very step after the HPC checkpoint was written would
    be restored not knowing it had: the resumed run would then find ``last.ckpt`` "taken" and write
    ``last-v1.ckpt`` from then on, leaving ``last.ckpt`` at the preempted step. Being a ``Checkpoint``, it is
    ordered with them (Lightning moves checkpoint callbacks last, keeping their order): list it after them.
    """

    def __init__(self, signum: int = signal.SIGUSR1) -> None:
        self.signum = signum
        self.requested = False
        self.saved = False

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if stage == "fit" and SLURMEnvironment.detect():
            signal.signal(self.signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        rank_zero_info(f"graphctx: signal {signum}: checkpoint and requeue after the running step")
        self.requested = True

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: object) -> None:
        """Save the HPC checkpoint at the end of the step during which the signal came."""
        if self.saved or not trainer.strategy.reduce_boolean_decision(self.requested, all=False):
            return
        path = trainer._checkpoint_connector.hpc_save_path(trainer.default_root_dir)
        trainer.save_checkpoint(path)
        rank_zero_info(f"graphctx: saved {path} at global step {trainer.global_step}")
        self.saved = True

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: object) -> None:
        """Requeue and exit before the next step starts.

        Requeueing only now, after the saved step's metrics went to the loggers, matters: ``scontrol requeue``
        makes SLURM terminate every process of the job at once, the W&B service among them, and a step still
        being logged would then be lost from the logs though it is in the checkpoint. The W&B run is finished
        first: a service still holding the run id would make the requeued job's ``wandb.init`` fail with
        "run ID is in use". (When the saved step was the last one, training ends normally and nothing is
        requeued.)
        """
        if not self.saved:
            return
        if trainer.is_global_zero:
            for logger in trainer.loggers:
                logger.save()
            finish_wandb_runs(trainer)
            requeue_slurm_job()
        raise SystemExit(0)
