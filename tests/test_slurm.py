"""scripts/slurm/train.sbatch on a real SLURM cluster: preempted by SIGUSR1, requeued, resumed, nothing lost.

The cluster is the single-node one of ``scripts/slurm/cluster.sh`` (``slurm_cluster`` fixture). The job trains
a tiny random Llama on the real cardano dump; while it trains the test sends ``scancel --signal=USR1``, as
the scheduler does before a preemption or the time limit (``--signal=USR1@120``).
"""

from __future__ import annotations

import csv
import os
import sys
import time
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.demos.boring_classes import BoringModel
from slurm_cluster import REPO_ROOT, SlurmCluster

from graphctx.model.preemption import RequeueAtStepBoundary
from train import add_run_callbacks

MAX_STEPS = 40
CHECKPOINT_EVERY = 8
SIGNAL_AFTER_STEP = CHECKPOINT_EVERY - 1
"""The signal comes once 7 steps are logged, so the step it interrupts is most often the 8th, where
ModelCheckpoint also saves last.ckpt: the case that used to leave last.ckpt at step 8 (see the test above)."""


def preemptible_config(tmp_path: Path, cardano_dir: Path) -> tuple[Path, Path]:
    """configs/tiny.yaml on a tiny random Llama, every output under tmp_path through
    ``trainer.default_root_dir`` alone, metrics.csv flushed every step."""
    config = yaml.safe_load((REPO_ROOT / "configs" / "tiny.yaml").read_text())
    root = tmp_path / "run"
    trainer = config["trainer"]
    trainer.update(
        default_root_dir=str(root),
        max_steps=MAX_STEPS,
        val_check_interval=None,
        limit_val_batches=0,
        enable_progress_bar=False,
    )
    for logger in trainer["logger"]:
        if logger["class_path"].endswith("CSVLogger"):
            logger["init_args"] = {"flush_logs_every_n_steps": 1}
    trainer["callbacks"][0]["init_args"].update(every_n_train_steps=CHECKPOINT_EVERY)
    config["cache_dir"] = str(tmp_path / "cache")
    config["model"]["spec"].update(source="tiny-random", quantization="none")
    config["data"]["dataset"]["source"] = str(cardano_dir)
    config["data"].update(max_length=256)
    config["knowledge"]["kg_dir"] = str(cardano_dir.parents[1] / "kg")
    path = tmp_path / "preemptible.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, root


def logged_steps(metrics_csv: Path) -> list[int]:
    """The ``step`` of every row of a CSVLogger metrics.csv that has a training loss."""
    if not metrics_csv.is_file():
        return []
    with metrics_csv.open() as handle:
        return [int(row["step"]) for row in csv.DictReader(handle) if row.get("train/loss")]


def wait_until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


class SignalledAt(BoringModel):
    """Lightning's demo model; the preemption signal arrives during the step that ends at ``step``."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.signal_step = step

    def training_step(self, batch, batch_idx):
        if self.global_step == self.signal_step - 1:
            next(c for c in self.trainer.callbacks if isinstance(c, RequeueAtStepBoundary)).requested = True
        return super().training_step(batch, batch_idx)


def _trainer(root: Path, max_steps: int) -> L.Trainer:
    """A CPU trainer with train.py's callbacks around a ModelCheckpoint that saves last.ckpt every 4 steps."""
    checkpoint = ModelCheckpoint(
        dirpath=root / "checkpoints", save_last=True, every_n_train_steps=4, save_top_k=0
    )
    trainer = L.Trainer(
        default_root_dir=root, max_steps=max_steps, callbacks=[checkpoint], logger=False,
        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
    )  # fmt: skip
    add_run_callbacks(trainer)
    return trainer


def test_preempted_at_a_checkpoint_step_the_resumed_run_keeps_refreshing_last_ckpt(tmp_path: Path) -> None:
    """The cause of the 8-vs-40 flake of the SLURM test: the signal landed in step 8, where ModelCheckpoint
    (every 8 steps) also saves. The HPC checkpoint was written before ModelCheckpoint saved last.ckpt, so
    it held a ModelCheckpoint state without last.ckpt; the resumed run found last.ckpt on disk, not its
    own, and wrote last-v1.ckpt at steps 16..40, leaving last.ckpt at step 8."""
    _trainer(tmp_path, max_steps=4).fit(SignalledAt(step=4))  # the signalled step is the last: no requeue
    hpc = tmp_path / "hpc_ckpt_1.ckpt"
    assert torch.load(hpc, weights_only=True)["global_step"] == 4
    _trainer(tmp_path, max_steps=12).fit(BoringModel(), ckpt_path=str(hpc))
    assert sorted(path.name for path in (tmp_path / "checkpoints").iterdir()) == ["last.ckpt"]
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 12


@pytest.mark.slow
def test_sigusr1_requeues_and_the_job_resumes_without_losing_or_repeating_a_step(
    slurm_cluster: SlurmCluster,
    cardano_dir: Path,
    tmp_path: Path,
) -> None:
    config, root = preemptible_config(tmp_path, cardano_dir)
    env = {
        **slurm_cluster.env,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "WANDB_MODE": "offline",
    }
    output = tmp_path / "job.out"
    cluster = SlurmCluster(slurm_cluster.folder, env)
    # The template asks for GPUs and a day; this cluster has 2 CPUs: one CPU task, no GPU, half an hour.
    job = cluster.run(
        "sbatch",
        "--parsable",
        "--gpus-per-node=0",
        "--ntasks-per-node=1",
        "--cpus-per-task=2",
        "--time=30",
        f"--output={output}",
        str(REPO_ROOT / "scripts" / "slurm" / "train.sbatch"),
        "--config",
        str(config),
    ).strip()
    first_log = root / "lightning_logs" / "version_0" / "metrics.csv"
    try:

        def training() -> bool:
            if cluster.job_field(job, "JobState") not in ("PENDING", "CONFIGURING", "RUNNING"):
                tail = output.read_text()[-3000:] if output.is_file() else ""
                raise AssertionError(f"job {job} ended before training got going:\n{tail}")
            return len(logged_steps(first_log)) >= SIGNAL_AFTER_STEP

        wait_until(
            training, 600, "the first training steps"
        )  # liveness bounds: a loaded 2-core runner is slow
        cluster.run("scancel", "--signal=USR1", job)

        # Lightning saves the checkpoint and runs `scontrol requeue`. SLURM holds a requeued batch job for
        # about two minutes (BeginTime); release it at once, as an admin could, to keep the test short.
        cluster.wait_for(job, lambda c, j: c.job_field(j, "Restarts") == "1", 300, "the requeue")
        cluster.wait_for(job, lambda c, j: c.job_field(j, "JobState") == "PENDING", 300, "the old run to end")
        cluster.release(job)
        cluster.wait_for(job, lambda c, j: c.job_field(j, "JobState") == "COMPLETED", 900, "completion")
    finally:
        if cluster.job_field(job, "JobState") not in ("COMPLETED", ""):
            cluster.run("scancel", job)
    log = output.read_text()

    # Two runs of one job: the first stopped after the signal, the second resumed from the HPC checkpoint.
    assert "restart 0" in log and "restart 1" in log, log[-3000:]
    hpc = torch.load(root / "hpc_ckpt_1.ckpt", weights_only=True, map_location="cpu")
    before = logged_steps(first_log)
    after = logged_steps(root / "lightning_logs" / "version_1" / "metrics.csv")
    assert 0 < len(before) < MAX_STEPS and after, (before, after)
    assert hpc["global_step"] == len(before)
    # Every optimiser step logged exactly once, in order, ending at max_steps.
    assert before + after == list(range(MAX_STEPS))
    assert torch.load(root / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == MAX_STEPS
    assert (root / "adapter" / "adapter_model.safetensors").is_file()

    # Both runs wrote to the same W&B run.
    runs = sorted((root / "wandb").glob("offline-run-*"))
    assert len(runs) == 2 and len({path.name.rsplit("-", 1)[1] for path in runs}) == 1, runs
