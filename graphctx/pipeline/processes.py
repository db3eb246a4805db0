"""The processes of one evaluation: one by default, or as many as Lightning launches for training.

``launch_processes`` reads the config's ``trainer.accelerator / devices / num_nodes / strategy`` (the keys
train.py uses) and starts them with Lightning Fabric's launcher: ``python evaluate.py`` with
``trainer.devices: 2`` starts a second process itself; under ``srun`` (SLURM) or ``torchrun`` the processes
already exist and only join the process group. Every collective the evaluation needs is here: broadcast
from rank 0, gather from every rank, a barrier, and "did any rank ask to stop"; and the one way work is
shared out (retrieval and the knowledge stage alike): each rank takes its :meth:`Processes.share` of the
positions, in whole runs (query batches) when asked, and :meth:`Processes.gather` puts the results back
together in position order on every rank.

:class:`StopRequest` is the preemption half of ``scripts/slurm/evaluate.sbatch``: under SLURM a SIGUSR1 only
raises a flag; each rank finishes the batch it is on, writes it, stops, and rank 0 requeues the job.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from lightning.fabric import Fabric
from lightning.fabric.plugins.environments import SLURMEnvironment

from graphctx.errors import ConfigError

T = TypeVar("T")

STRATEGIES = ("auto", "ddp")
"""``trainer.strategy`` values evaluate.py runs under (one process per device, each with its own models)."""


@dataclass
class Processes:
    """This process's place among the evaluation's processes; a single process without ``fabric``."""

    fabric: Fabric | None = None

    @property
    def rank(self) -> int:
        return self.fabric.global_rank if self.fabric else 0

    @property
    def world_size(self) -> int:
        return self.fabric.world_size if self.fabric else 1

    @property
    def is_zero(self) -> bool:
        return self.rank == 0

    @property
    def device(self) -> str | None:
        """This process's CUDA device (``cuda:<local rank>``) when launched on GPUs; None on the CPU, where
        each stage's own ``device`` setting applies."""
        if self.fabric is None or self.fabric.device.type != "cuda":
            return None
        return str(self.fabric.device)

    def broadcast(self, value: T) -> T:
        """Rank 0's ``value`` on every rank (pickled)."""
        return self.fabric.broadcast(value, src=0) if self.world_size > 1 else value

    def gather(self, value: T) -> list[T]:
        """Every rank's ``value`` (pickled), in rank order, on every rank."""
        if self.world_size == 1:
            return [value]
        values: list[Any] = [None] * self.world_size
        dist.all_gather_object(values, value)
        return values

    def share(self, count: int, unit: int = 1) -> range:
        """This rank's contiguous share of ``count`` positions, in whole runs of ``unit`` (see
        :func:`share_of`): the shares of all ranks cover every position once, in rank order."""
        return share_of(count, unit, self.rank, self.world_size)

    def barrier(self) -> None:
        if self.world_size > 1:
            self.fabric.barrier()

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is true on any rank."""
        if self.world_size == 1:
            return flag
        count = torch.tensor(float(flag), device=self.fabric.device)  # NCCL reduces CUDA tensors only
        return bool(self.fabric.all_reduce(count, reduce_op="sum").item() > 0)


def share_of(count: int, unit: int, rank: int, world_size: int) -> range:
    """The positions of rank ``r`` of ``W``: of the ``R = ⌈count / unit⌉`` runs of ``unit`` positions (the
    last one may be short), in order, ``⌊R / W⌋`` runs each and one more for the first ``R mod W`` ranks
    (fewer runs than ranks: the first ranks take one each)."""
    runs, extra = divmod(-(-count // unit), world_size)
    first = rank * runs + min(rank, extra)
    end = first + runs + (rank < extra)
    return range(first * unit, min(end * unit, count))


def launch_processes(trainer: dict[str, Any]) -> Processes:
    """Start (or join) the processes the ``trainer`` section asks for; one process needs no launcher."""
    strategy = trainer.get("strategy", "auto")
    if strategy not in STRATEGIES:
        raise ConfigError(
            f"trainer.strategy: evaluate.py runs under {list(STRATEGIES)} (one process per device), "
            f"got {strategy!r}"
        )
    fabric = Fabric(
        accelerator=trainer.get("accelerator", "auto"),
        devices=trainer.get("devices", "auto"),
        num_nodes=trainer.get("num_nodes", 1),
        strategy=strategy,
    )
    if fabric.world_size == 1 and not SLURMEnvironment.detect():
        return Processes()
    fabric.launch()
    return Processes(fabric)


class Preempted(Exception):
    """A stop was requested (SIGUSR1 under SLURM): every rank wrote what it had finished and stopped."""


class StopRequest:
    """Under SLURM, ``signum`` (``--signal=USR1@90`` or ``scancel --signal=USR1``) sets :attr:`requested`
    instead of killing the process; the evaluation checks it after every batch it writes."""

    def __init__(self, signum: int = signal.SIGUSR1) -> None:
        self.requested = False
        if SLURMEnvironment.detect():
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
