"""The retrieval stage's parts from its settings: where :class:`RetrievalSettings` meets the algorithms.

The algorithms (:mod:`~graphctx.retrieval.embeddings`, :mod:`~graphctx.retrieval.graph`,
:mod:`~graphctx.retrieval.pagerank`, :mod:`~graphctx.retrieval.dense`) take plain arguments; each function
here reads the fields of the ``retrieval:`` section that one of them needs and calls it. The index and the
retrievers (:func:`~graphctx.retrieval.index.build_index`,
:func:`~graphctx.retrieval.retriever.build_retriever`) build on these.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
from torch import Tensor
from torch_geometric.data import Data

from graphctx.retrieval.embeddings import embed_texts, load_encoder
from graphctx.retrieval.encoder import SentenceEncoder
from graphctx.retrieval.graph import build_question_graph, query_edges
from graphctx.retrieval.knn import build_knn_graph, edge_recall
from graphctx.retrieval.numerics import embedding_dtype, numerics, resolve_device
from graphctx.retrieval.pagerank import PoolPageRank, QueryEdges
from graphctx.retrieval.push import PoolPush
from graphctx.retrieval.push_frontier import FrontierPush
from graphctx.retrieval.settings import RetrievalSettings


def retrieval_numerics(settings: RetrievalSettings, device: torch.device | None = None) -> dict[str, object]:
    """:func:`~graphctx.retrieval.numerics.numerics` of the settings (``device`` by default
    ``settings.device`` resolved), for cache keys and fingerprints.

    Examples:
        >>> retrieval_numerics(RetrievalSettings(device="cpu", cpu_threads=2))
        {'device': 'cpu', 'embedding_dtype': 'float32', 'cpu_threads': 2}
    """
    device = device or resolve_device(settings.device)
    return numerics(device, embedding_dtype(settings.embedding_dtype, device), settings.cpu_threads)


def build_encoder(settings: RetrievalSettings, device: torch.device | None = None) -> SentenceEncoder:
    """The ``settings.embedding_model`` encoder in ``settings.embedding_dtype`` on ``device`` (by default
    ``settings.device``), capped at ``settings.max_seq_length`` tokens.

    Examples:
        >>> build_encoder(RetrievalSettings(device="cpu", max_seq_length=32)).max_length
        32
    """
    return load_encoder(
        settings.embedding_model,
        device=device or settings.device,
        dtype=settings.embedding_dtype,
        max_seq_length=settings.max_seq_length,
    )


def embedding_identity(settings: RetrievalSettings) -> dict[str, object]:
    """The settings that decide the embeddings of a text (and so their cache entry), besides the model."""
    return {
        "instruction": settings.instruction,
        "max_seq_length": settings.max_seq_length,
        "device": settings.device,
        "dtype": settings.embedding_dtype,
        "cpu_threads": settings.cpu_threads,
    }


def build_embeddings(
    texts: Sequence[str],
    settings: RetrievalSettings,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    model: SentenceEncoder | None = None,
) -> Tensor:
    """Cached embeddings of ``texts`` (:func:`~graphctx.retrieval.embeddings.embed_texts`) as the settings
    embed every question: model, instruction, length limit, batch size, device, dtype and CPU threads.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as cache:
        ...     build_embeddings(["Staking ADA"], RetrievalSettings(device="cpu"), cache_dir=cache).shape
        torch.Size([1, 384])
    """
    return embed_texts(
        texts,
        settings.embedding_model,
        batch_size=settings.embedding_batch_size,
        cache_dir=cache_dir,
        model=model,
        **embedding_identity(settings),
    )


def build_graph(embeddings: Tensor, settings: RetrievalSettings) -> Data:
    """The question graph of the pool ``embeddings`` at ``settings.threshold``, capped at
    ``settings.max_neighbors``: exact (:func:`~graphctx.retrieval.graph.build_question_graph`, products
    of ``settings.similarity_chunk_size`` rows in ``settings.similarity_dtype``) or, with
    ``graph_build: knn``, from ``knn_k`` nearest neighbours (:func:`~graphctx.retrieval.knn.build_knn_graph`).

    Examples:
        >>> unit = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
        >>> build_graph(unit, RetrievalSettings(threshold=0.7)).edge_index.tolist()
        [[0, 1], [1, 0]]
    """
    if settings.graph_build == "knn":
        return build_knn_graph(
            embeddings,
            settings.threshold,
            settings.knn_k,
            nprobe=settings.knn_nprobe,
            max_neighbors=settings.max_neighbors,
        )
    return build_question_graph(
        embeddings,
        settings.threshold,
        max_neighbors=settings.max_neighbors,
        chunk_size=settings.similarity_chunk_size,
        dtype=settings.similarity_dtype,
    )


def build_stats_extra(graph: Data, embeddings: Tensor, settings: RetrievalSettings) -> dict[str, object]:
    """What the index stats record of the build beyond degrees: ``graph_build``, and for ``knn`` its
    ``knn_k`` and sampled above-threshold ``edge_recall`` (:func:`~graphctx.retrieval.knn.edge_recall`).

    Examples:
        >>> build_stats_extra(None, None, RetrievalSettings())
        {'graph_build': 'exact'}
    """
    if settings.graph_build != "knn":
        return {"graph_build": "exact"}
    recall = edge_recall(graph, embeddings, settings.threshold, settings.knn_recall_sample)
    return {
        "graph_build": "knn",
        "knn_k": settings.knn_k,
        "knn_nprobe": settings.knn_nprobe,
        "edge_recall": recall,
    }


def build_query_edges(queries: Tensor, pool: Tensor, settings: RetrievalSettings) -> QueryEdges:
    """Edges from query embeddings to the pool (:func:`~graphctx.retrieval.graph.query_edges`) by the
    graph's own rule: ``settings.threshold``, ``max_neighbors``, ``similarity_chunk_size`` and dtype.

    Examples:
        >>> pool = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
        >>> build_query_edges(torch.tensor([[0.0, 1.0]]), pool, RetrievalSettings()).node.tolist()
        [2]
    """
    return query_edges(
        queries,
        pool,
        settings.threshold,
        max_neighbors=settings.max_neighbors,
        chunk_size=settings.similarity_chunk_size,
        dtype=settings.similarity_dtype,
    )


def build_pagerank(graph: Data, settings: RetrievalSettings) -> PoolPageRank | PoolPush | FrontierPush:
    """:class:`~graphctx.retrieval.pagerank.PoolPageRank` of ``graph`` with the settings' damping,
    convergence, dtype and tie rule, batches bounded by ``max_batch_slots``, ``shared_component_nodes`` and
    ``query_batch_size`` columns; with ``ppr: push``, :class:`~graphctx.retrieval.push.PoolPush` at
    ``ppr_eps`` with the same damping, dtype and tie rule (on a CUDA graph its torch twin
    :class:`~graphctx.retrieval.push_frontier.FrontierPush`).

    Examples:
        >>> from torch_geometric.data import Data
        >>> path = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), edge_weight=torch.ones(2), num_nodes=2)
        >>> build_pagerank(path, RetrievalSettings(alpha=0.5, pagerank_dtype="float64")).alpha
        0.5
    """
    if settings.ppr == "push":
        push = FrontierPush if graph.edge_index.is_cuda else PoolPush
        return push(
            graph,
            alpha=settings.alpha,
            eps=settings.ppr_eps,
            dtype=getattr(torch, settings.pagerank_dtype),
            tie_tolerance=settings.tie_tolerance,
        )
    return PoolPageRank(
        graph,
        alpha=settings.alpha,
        tol=settings.tol,
        max_iter=settings.max_iter,
        dtype=getattr(torch, settings.pagerank_dtype),
        tie_tolerance=settings.tie_tolerance,
        max_batch_slots=settings.max_batch_slots,
        shared_component_nodes=settings.shared_component_nodes,
        max_columns=settings.query_batch_size,
    )
