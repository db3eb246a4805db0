"""The scale modes from their settings: where ``retrieval.scale`` meets the k-NN build
(:mod:`~graphctx.retrieval.scale.knn`) and forward push (:mod:`~graphctx.retrieval.scale.push`,
:mod:`~graphctx.retrieval.scale.push_frontier`). :mod:`graphctx.retrieval.builders`, the paper's path,
hands a mode that is on to these functions and reaches the scale modes nowhere else.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.data import Data

from graphctx.retrieval.scale.knn import build_knn_graph, edge_recall
from graphctx.retrieval.scale.push import PoolPush
from graphctx.retrieval.scale.push_frontier import FrontierPush
from graphctx.retrieval.settings import RetrievalSettings


def build_knn(embeddings: Tensor, settings: RetrievalSettings) -> Data:
    """The question graph at ``settings.threshold`` from each question's ``scale.knn_k`` nearest neighbours
    (``scale.knn_nprobe`` cells searched; :func:`~graphctx.retrieval.scale.knn.build_knn_graph`), capped at
    ``settings.max_neighbors``.

    Examples:
        >>> from graphctx.retrieval.scale.settings import ScaleSettings
        >>> unit = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
        >>> knn = RetrievalSettings(threshold=0.7, scale=ScaleSettings(graph_build="knn", knn_k=2))
        >>> build_knn(unit, knn).edge_index.tolist()
        [[0, 1], [1, 0]]
    """
    scale = settings.scale
    return build_knn_graph(
        embeddings,
        settings.threshold,
        scale.knn_k,
        nprobe=scale.knn_nprobe,
        max_neighbors=settings.max_neighbors,
    )


def knn_stats(graph: Data, embeddings: Tensor, settings: RetrievalSettings) -> dict[str, object]:
    """What the index stats record of a k-NN build: its ``knn_k``, ``knn_nprobe`` and the above-threshold
    ``edge_recall`` on ``scale.knn_recall_sample`` sampled nodes
    (:func:`~graphctx.retrieval.scale.knn.edge_recall`)."""
    scale = settings.scale
    recall = edge_recall(graph, embeddings, settings.threshold, scale.knn_recall_sample)
    return {"graph_build": "knn", "knn_k": scale.knn_k, "knn_nprobe": scale.knn_nprobe, "edge_recall": recall}


def build_push(graph: Data, settings: RetrievalSettings) -> PoolPush | FrontierPush:
    """Forward-push PageRank of ``graph`` at ``scale.ppr_eps`` with the settings' damping, dtype and tie
    rule: :class:`~graphctx.retrieval.scale.push.PoolPush` on the CPU, its torch twin
    :class:`~graphctx.retrieval.scale.push_frontier.FrontierPush` on a CUDA graph.

    Examples:
        >>> from graphctx.retrieval.scale.settings import ScaleSettings
        >>> path = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), edge_weight=torch.ones(2), num_nodes=2)
        >>> type(build_push(path, RetrievalSettings(scale=ScaleSettings(ppr="push")))).__name__
        'PoolPush'
    """
    push = FrontierPush if graph.edge_index.is_cuda else PoolPush
    return push(
        graph,
        alpha=settings.alpha,
        eps=settings.scale.ppr_eps,
        dtype=getattr(torch, settings.pagerank_dtype),
        tie_tolerance=settings.tie_tolerance,
    )
