"""Retrieval as a LightningModule: ``trainer.predict`` embeds and ranks query batches on every device.

With ``Trainer(strategy="ddp", devices=..., num_nodes=...)`` Lightning shards the query DataLoader across
processes (its distributed sampler), so many GPUs and nodes are used with the same launcher as training.
Each process holds the whole pool index. Under DDP ``trainer.predict`` returns each process's own share:
collect them with a ``lightning.pytorch.callbacks.BasePredictionWriter`` (its ``batch_indices`` give the
query positions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightning as L
from sentence_transformers import SentenceTransformer
from torch.utils.data import DataLoader

from graphctx.retrieval.embeddings import load_encoder
from graphctx.retrieval.index import RetrievalIndex
from graphctx.retrieval.retriever import EmbeddingRetriever, Hit, build_retriever
from graphctx.retrieval.settings import RetrievalSettings


class RetrievalModule(L.LightningModule):
    """``predict_step`` ranks a batch of query strings (or ``{"question": [...]}``) into hits per query."""

    def __init__(
        self, index: RetrievalIndex, settings: RetrievalSettings, encoder: SentenceTransformer | None = None
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
        encoder = self.encoder.to(device) if self.encoder is not None else load_encoder(self.settings, device)
        self.retriever = build_retriever(self.index, self.settings, encoder=encoder, device=device)

    def predict_step(self, batch: Sequence[str] | dict[str, Any], batch_idx: int = 0) -> list[list[Hit]]:
        queries = batch["question"] if isinstance(batch, dict) else batch
        retriever = self.retriever
        if retriever is None:
            raise RuntimeError("RetrievalModule.configure_model has not run: use it through trainer.predict")
        return retriever.rank(retriever.embed(list(queries)))


def query_loader(queries: Sequence[str], settings: RetrievalSettings) -> DataLoader:
    """Batches of ``settings.query_batch_size`` query strings, in order."""
    return DataLoader(list(queries), batch_size=settings.query_batch_size, shuffle=False, collate_fn=list)
