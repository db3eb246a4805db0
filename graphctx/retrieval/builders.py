"""The retrieval stage's parts from its settings: where :class:`RetrievalSettings` meets the algorithms.

The paper's path: embed the questions (:func:`build_embeddings`), link those with a cosine above T
(:func:`build_graph`, :func:`build_query_edges`) and rank pool questions by networkx-exact power iteration
(:func:`build_pagerank`). The algorithms (:mod:`~graphctx.retrieval.embeddings`,
:mod:`~graphctx.retrieval.graph`, :mod:`~graphctx.retrieval.pagerank`, :mod:`~graphctx.retrieval.dense`)
take plain arguments; each function here reads the fields one of them needs and calls it. The index and
the retrievers (:func:`~graphctx.retrieval.index.build_index`,
:func:`~graphctx.retrieval.retriever.build_retriever`) build on these.

This module is also the one branch point of the scale modes (``retrieval.scale``,
:mod:`graphctx.retrieval.scale`): :func:`build_graph`, :func:`build_stats_extra` and :func:`build_pagerank`
each hand a mode that is on to :mod:`graphctx.retrieval.scale.builders`, first thing, and otherwise run
the paper's step.
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
from graphctx.retrieval.numerics import embedding_dtype, numerics, resolve_device
from graphctx.retrieval.pagerank import PoolPageRank, QueryEdges, Ranker
from graphctx.retrieval.scale.builders import build_knn, build_push, knn_stats
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


def build_encoder(settings: RetrievalSettings, device: str | torch.device | None = None) -> SentenceEncoder:
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
    """The question graph of the pool ``embeddings``: every pair with a cosine above ``settings.threshold``
    (:func:`~graphctx.retrieval.graph.build_question_graph`, products of ``settings.similarity_chunk_size``
    rows in ``settings.similarity_dtype``), capped at ``settings.max_neighbors``. With
    ``scale.graph_build: knn``, the approximate k-NN build instead
    (:func:`~graphctx.retrieval.scale.builders.build_knn`).

    Examples:
        >>> unit = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
        >>> build_graph(unit, RetrievalSettings(threshold=0.7)).edge_index.tolist()
        [[0, 1], [1, 0]]
    """
    if settings.scale.graph_build == "knn":
        return build_knn(embeddings, settings)
    return build_question_graph(
        embeddings,
        settings.threshold,
        max_neighbors=settings.max_neighbors,
        chunk_size=settings.similarity_chunk_size,
        dtype=settings.similarity_dtype,
    )


def build_stats_extra(graph: Data, embeddings: Tensor, settings: RetrievalSettings) -> dict[str, object]:
    """What the index stats record of the build beyond degrees: ``graph_build: exact``; a k-NN build's own
    record instead (:func:`~graphctx.retrieval.scale.builders.knn_stats`: k, nprobe, sampled edge recall).

    Examples:
        >>> build_stats_extra(None, None, RetrievalSettings())
        {'graph_build': 'exact'}
    """
    if settings.scale.graph_build == "knn":
        return knn_stats(graph, embeddings, settings)
    return {"graph_build": "exact"}


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


def build_pagerank(graph: Data, settings: RetrievalSettings) -> Ranker:
    """:class:`~graphctx.retrieval.pagerank.PoolPageRank` of ``graph`` with the settings' damping,
    convergence, dtype and tie rule, batches bounded by ``max_batch_slots``, ``shared_component_nodes`` and
    ``query_batch_size`` columns. With ``scale.ppr: push``, forward push instead
    (:func:`~graphctx.retrieval.scale.builders.build_push`).

    Examples:
        >>> from torch_geometric.data import Data
        >>> path = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), edge_weight=torch.ones(2), num_nodes=2)
        >>> build_pagerank(path, RetrievalSettings(alpha=0.5, pagerank_dtype="float64")).alpha
        0.5
    """
    if settings.scale.ppr == "push":
        return build_push(graph, settings)
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
