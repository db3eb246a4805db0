"""Retrieval as a LightningModule: ``trainer.predict`` embeds and ranks query batches on every device.

With ``Trainer(strategy="ddp", devices=..., num_nodes=...)`` Lightning shards the query DataLoader across
processes, so many GPUs and nodes are used with the same launcher as training. Each process holds the whole
pool index. Lightning's own predict sampler (``UnrepeatedDistributedSampler``) gives process ``r`` of ``W``
the queries ``r, r + W, r + 2W, ...``, and ``trainer.predict`` returns only that process's own batches.

:func:`predict_hits` is the one call to use: its loader's :class:`WholeBatches` sampler (kept by Lightning,
being a ``DistributedSampler``) gives each process a contiguous run of the very batches a single process
ranks, so that every query is embedded and ranked with the same queries, whatever the number of processes;
it runs ``trainer.predict`` with a :class:`GatherPredictions` callback and returns one hit list per query,
in the order of the queries, on every process: the list a single-process run gives, scores bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import lightning as L
import torch.distributed as dist
from lightning.pytorch.callbacks import BasePredictionWriter
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from graphctx.retrieval.builders import build_encoder
from graphctx.retrieval.encoder import SentenceEncoder
from graphctx.retrieval.index import RetrievalIndex
from graphctx.retrieval.retriever import EmbeddingRetriever, Hit, build_retriever
from graphctx.retrieval.settings import RetrievalSettings


class RetrievalModule(L.LightningModule):
    """``predict_step`` ranks a batch of query strings (or ``{"question": [...]}``) into hits per query."""

    def __init__(
        self, index: RetrievalIndex, settings: RetrievalSettings, encoder: SentenceEncoder | None = None
    ) -> None:
        """``encoder``: an already loaded query encoder; by default each process loads its own."""
        super().__init__()
        self.settings = settings
        self.index = index
        self.encoder = encoder
        self.retriever: EmbeddingRetriever | None = None

    def configure_model(self) -> None:
        """Load the encoder and move the pool to this process's device (once per process)."""
        if self.retriever is not None:
            return
        device = self.trainer.strategy.root_device
        encoder = (
            self.encoder.to(device) if self.encoder is not None else build_encoder(self.settings, device)
        )
        self.retriever = build_retriever(self.index, self.settings, encoder=encoder, device=device)

    def predict_step(self, batch: Sequence[str] | dict[str, Any], batch_idx: int = 0) -> list[list[Hit]]:
        queries = batch["question"] if isinstance(batch, dict) else batch
        retriever = self.retriever
        if retriever is None:
            raise RuntimeError("RetrievalModule.configure_model has not run: use it through trainer.predict")
        return retriever.rank(retriever.embed(list(queries)))


class GatherPredictions(BasePredictionWriter):
    """After ``trainer.predict``, :attr:`predictions` holds one prediction per dataset row, in row order,
    on every process.

    Each process pairs its predictions with the dataset positions its sampler gave it (Lightning's
    ``batch_indices``), the pairs of all processes are exchanged with ``torch.distributed.all_gather_object``,
    and a position seen twice (a padding ``DistributedSampler`` repeats rows so that every process gets as
    many) is kept once. One predict dataloader; ``predict_step`` must return one item per batch row.
    """

    def __init__(self) -> None:
        super().__init__(write_interval="epoch")
        self.predictions: list[Any] = []

    def write_on_epoch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        predictions: Sequence[Any],
        batch_indices: Sequence[Any],
    ) -> None:
        """``predictions``: this process's batches; ``batch_indices``: per dataloader, per batch, the rows."""
        if len(batch_indices) != 1:
            raise ValueError(f"GatherPredictions handles one predict dataloader, got {len(batch_indices)}")
        local = [
            (position, row)
            for batch, positions in zip(predictions, batch_indices[0], strict=True)
            for position, row in zip(positions, batch, strict=True)
        ]
        if trainer.world_size > 1:
            shares: list[Any] = [None] * trainer.world_size
            dist.all_gather_object(shares, local)
            local = [pair for share in shares for pair in share]
        by_position = dict(local)
        self.predictions = [by_position[position] for position in sorted(by_position)]


def batch_count(rows: int, batch_size: int) -> int:
    """How many batches of ``batch_size`` the rows make (the last one may be short)."""
    return -(-rows // batch_size)


class WholeBatches(DistributedSampler):
    """Process ``r`` of ``W`` gets the positions of batches ``r·B // W`` up to ``(r + 1)·B // W`` of the
    ``B`` batches of ``batch_size`` a single process makes: whole batches, in order, each once.

    The ranks are read from the process group when the sampler is iterated (``trainer.predict`` starts the
    group), not when it is made."""

    def __init__(self, rows: int, batch_size: int) -> None:  # no super().__init__: it needs the group
        self.rows = rows
        self.batch_size = batch_size

    def positions(self) -> range:
        rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
        batches = batch_count(self.rows, self.batch_size)
        first, end = rank * batches // world, (rank + 1) * batches // world
        return range(first * self.batch_size, min(end * self.batch_size, self.rows))

    def __iter__(self) -> Iterator[int]:
        return iter(self.positions())

    def __len__(self) -> int:
        return len(self.positions())

    def set_epoch(self, epoch: int) -> None:
        """Every epoch the same batches (Lightning calls this on a ``DistributedSampler``)."""


def query_loader(queries: Sequence[str], batch_size: int) -> DataLoader:
    """Batches of ``batch_size`` query strings, in order; over several processes, each process gets whole
    batches of them (:class:`WholeBatches`).

    Examples:
        >>> list(query_loader(["a", "b", "c"], batch_size=2))
        [['a', 'b'], ['c']]
    """
    return DataLoader(
        list(queries), batch_size=batch_size, sampler=WholeBatches(len(queries), batch_size), collate_fn=list
    )


def predict_hits(trainer: L.Trainer, module: RetrievalModule, queries: Sequence[str]) -> list[list[Hit]]:
    """Ranked hits for every query, in query order, on every process: ``trainer.predict`` shards the
    queries over the trainer's processes in whole batches (:class:`WholeBatches`; DDP: ``strategy="ddp"``,
    torchrun or SLURM launched) and :class:`GatherPredictions` puts the shares back together. Each process
    needs at least one batch of ``settings.query_batch_size`` queries.

    Strategies that spawn or fork worker processes from this one (``ddp_spawn``, ``ddp_fork``) predict in
    the children and cannot hand the hits back, nor can a ``limit_predict_batches`` run rank every query:
    both raise ``RuntimeError``.
    """
    processes = trainer.num_devices * trainer.num_nodes
    batches = batch_count(len(queries), module.settings.query_batch_size)
    if 0 < batches < processes:
        raise ValueError(
            f"{len(queries)} queries make {batches} batch(es) of retrieval.query_batch_size "
            f"{module.settings.query_batch_size} for {processes} processes: each process needs a batch; use "
            "fewer devices or smaller batches (or build_retriever(...).retrieve) for so few queries"
        )
    gather = GatherPredictions()
    trainer.callbacks.append(gather)
    try:
        trainer.predict(
            module, query_loader(queries, module.settings.query_batch_size), return_predictions=False
        )
    finally:
        trainer.callbacks.remove(gather)
    if len(gather.predictions) != len(queries):
        raise RuntimeError(
            f"trainer.predict returned hits for {len(gather.predictions)} of {len(queries)} queries "
            f"(limit_predict_batches={trainer.limit_predict_batches}, strategy "
            f"{type(trainer.strategy).__name__}: ddp_spawn and ddp_fork predict in child processes)"
        )
    return gather.predictions
