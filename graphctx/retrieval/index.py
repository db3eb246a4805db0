"""The retrieval index of a pool of past questions: ids, embeddings and question graph, cached together."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor
from torch_geometric.data import Data

from graphctx.cache import cache_root, fingerprint, publish_once, read_entry
from graphctx.retrieval.builders import build_embeddings, build_graph, build_stats_extra, retrieval_numerics
from graphctx.retrieval.embeddings import texts_digest
from graphctx.retrieval.graph import degree_stats, load_graph, save_graph
from graphctx.retrieval.numerics import pinned_threads, resolve_device, similarity_dtype
from graphctx.retrieval.settings import RetrievalSettings


@dataclass
class RetrievalIndex:
    """Pool node ``i`` is the question with id ``ids[i]`` and embedding ``embeddings[i]``."""

    ids: Tensor
    """[N] long: question ids (the dataset's ``id`` column)."""
    embeddings: Tensor
    """[N, d] float32, L2-normalised."""
    graph: Data
    """Question graph over the pool nodes (``edge_index``, ``edge_weight``, ``num_nodes``)."""
    stats: dict[str, float]
    """Degree statistics of the graph (:func:`graphctx.retrieval.graph.degree_stats`), its build and, for
    a knn build, the sampled edge recall (:func:`graphctx.retrieval.builders.build_stats_extra`)."""

    def to(self, device: str | torch.device) -> RetrievalIndex:
        """The same index with its tensors on ``device``."""
        return RetrievalIndex(
            self.ids.to(device), self.embeddings.to(device), self.graph.to(device), self.stats
        )

    def save(self, folder: str | os.PathLike[str]) -> None:
        """Write ``ids.pt``, ``embeddings.pt``, ``graph.pt`` and ``stats.json`` into ``folder`` atomically."""
        with publish_once(folder) as tmp:
            tmp.mkdir(parents=True)
            torch.save(self.ids.cpu(), tmp / "ids.pt")
            torch.save(self.embeddings.cpu(), tmp / "embeddings.pt")
            save_graph(self.graph, tmp / "graph.pt")
            (tmp / "stats.json").write_text(json.dumps(self.stats, indent=2))

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> RetrievalIndex:
        """Read an index written by :meth:`save`; a missing or damaged file, or parts that disagree on the
        number of questions, raise naming the folder."""
        folder = Path(folder)
        if not (folder / "ids.pt").is_file():
            raise FileNotFoundError(f"retrieval index not found in {folder}")
        index = cls(
            ids=torch.load(folder / "ids.pt", weights_only=True),
            embeddings=torch.load(folder / "embeddings.pt", weights_only=True),
            graph=load_graph(folder / "graph.pt"),
            stats=json.loads((folder / "stats.json").read_text()),
        )
        if not len(index.ids) == len(index.embeddings) == index.graph.num_nodes:
            raise ValueError(
                f"{folder}: {len(index.ids)} ids, {len(index.embeddings)} embeddings and a graph of "
                f"{index.graph.num_nodes} nodes"
            )
        return index


GRAPH_WEIGHTS = "exact_dot"
"""How graph weights are computed (in the index key: entries of the earlier block-product weights, equal
up to the last bit, are not reused, so an added-to index and a rebuild agree bit for bit)."""


def index_key(ids: Sequence[int], texts: Sequence[str], settings: RetrievalSettings) -> str:
    """Hash of everything the index depends on: pool ids and texts, model, instruction, length limit, graph
    settings (threshold, neighbour cap, product dtype; a k-NN build adds its own:
    :meth:`~graphctx.retrieval.scale.settings.ScaleSettings.index_key_parts`) and the embeddings' device
    type, dtype and CPU threads (:func:`~graphctx.retrieval.numerics.numerics`)."""
    device = resolve_device(settings.device)
    similarity = str(similarity_dtype(settings.similarity_dtype, device)).removeprefix("torch.")
    return fingerprint(
        list(map(int, ids)),
        texts_digest(texts),
        settings.embedding_model,
        settings.instruction,
        settings.max_seq_length,
        settings.threshold,
        settings.max_neighbors,
        similarity,
        GRAPH_WEIGHTS,
        *settings.scale.index_key_parts(),
        retrieval_numerics(settings, device),
    )


def build_index(
    ids: Sequence[int],
    texts: Sequence[str],
    settings: RetrievalSettings,
    cache_dir: str | os.PathLike[str] | None = None,
) -> RetrievalIndex:
    """Embed the pool and build its question graph, or read both from ``<cache>/retrieval-index/<key>``.

    Examples:
        >>> import tempfile
        >>> from graphctx.retrieval.settings import RetrievalSettings
        >>> texts = ["How do I stake ADA?", "How to stake ADA", "What is a UTXO?"]
        >>> with tempfile.TemporaryDirectory() as cache:
        ...     index = build_index([7, 8, 9], texts, RetrievalSettings(device="cpu", threshold=0.7), cache)
        >>> index.embeddings.shape, index.stats["edges"]
        (torch.Size([3, 384]), 1)
    """
    if len(ids) != len(texts):
        raise ValueError(f"pool has {len(ids)} ids but {len(texts)} texts")
    if len(set(map(int, ids))) != len(ids):
        raise ValueError("pool ids must be unique")
    folder = cache_root(cache_dir) / "retrieval-index" / index_key(ids, texts, settings)
    cached = read_entry(folder, RetrievalIndex.load)  # a damaged entry is moved aside and rebuilt
    if cached is not None:
        return cached
    device = resolve_device(settings.device)
    embeddings = build_embeddings(texts, settings, cache_dir=cache_dir)
    with pinned_threads(settings.cpu_threads, device):
        graph = build_graph(embeddings.to(device), settings).cpu()
    index = RetrievalIndex(torch.tensor(list(map(int, ids)), dtype=torch.long), embeddings, graph, {})
    index.stats = {**degree_stats(graph), **build_stats_extra(graph, embeddings, settings)}
    index.save(folder)
    return index
