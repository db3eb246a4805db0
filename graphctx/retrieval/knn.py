r"""The approximate question graph: each question's ``k`` nearest neighbours by Faiss, kept where
:math:`\cos > T`, symmetrised, in the exact build's format (:func:`~graphctx.retrieval.graph.
build_question_graph`: weights the float32 cosines, both directions stored, same ``max_neighbors`` cap).

A node with more than ``k`` neighbours above T keeps only ``k`` of them (plus those that chose it), so the
graph is a subgraph of the exact one; :func:`edge_recall` measures how much of it on sampled nodes.

Index: HNSW (``IndexHNSWFlat``, inner product, M=32) on the CPU; on a machine where
``faiss.get_num_gpus() > 0`` and the embeddings are on CUDA, a brute-force ``GpuIndexFlatIP`` over all
GPUs (exact top-k).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, to_undirected

from graphctx.retrieval.graph import cap_neighbors, check_max_neighbors, exact_dot, similarity_edges

HNSW_M = 32
"""Links per HNSW node (Faiss's usual 32)."""
HNSW_EF_CONSTRUCTION = 80
"""Candidates kept while inserting."""


def knn_search(embeddings: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Each row's ``k`` most similar other rows (ids [N, k], -1 padded) by inner product, with Faiss."""
    import faiss

    vectors = np.ascontiguousarray(embeddings.detach().float().cpu().numpy())
    take = min(k + 1, len(vectors))
    if embeddings.is_cuda and faiss.get_num_gpus() > 0:
        index = faiss.index_cpu_to_all_gpus(faiss.IndexFlatIP(vectors.shape[1]))
    else:
        index = faiss.IndexHNSWFlat(vectors.shape[1], HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = max(2 * take, 64)
    index.add(vectors)
    _, ids = index.search(vectors, take)
    ids = torch.from_numpy(ids).to(embeddings.device)
    own = ids == torch.arange(len(ids), device=ids.device)[:, None]
    return torch.where(own, -1, ids), own


def build_knn_graph(
    embeddings: Tensor, threshold: float, k: int, *, max_neighbors: int | None = None
) -> Data:
    r"""The question graph from each node's ``k`` nearest neighbours (:func:`knn_search`) with
    :math:`\cos > T` (``threshold``), the union of both directions, capped like the exact build.

    Examples:
        >>> unit = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
        >>> build_knn_graph(unit, 0.5, k=2).edge_index.tolist()
        [[0, 1, 1, 2], [1, 0, 2, 1]]
    """
    cap = check_max_neighbors(max_neighbors)
    ids, _ = knn_search(embeddings, k)
    rows = torch.arange(len(ids), device=ids.device)[:, None].expand_as(ids).flatten()
    cols = ids.flatten()
    keep = cols >= 0
    rows, cols = rows[keep], cols[keep]
    low, high = torch.minimum(rows, cols), torch.maximum(rows, cols)
    pairs = coalesce(torch.stack([low, high]), num_nodes=len(embeddings))
    weights = exact_dot(embeddings, embeddings, pairs[0], pairs[1])
    above = weights > threshold
    rows, cols, weights = pairs[0][above], pairs[1][above], weights[above].float()
    if cap is not None:
        rows, cols, weights = cap_neighbors(rows, cols, weights, cap)
    edge_index, edge_weight = to_undirected(torch.stack([rows, cols]), weights, num_nodes=len(embeddings))
    return Data(edge_index=edge_index, edge_weight=edge_weight, num_nodes=len(embeddings))


def edge_recall(graph: Data, embeddings: Tensor, threshold: float, sample: int, seed: int = 0) -> float:
    """Share of the above-``threshold`` edges of ``sample`` nodes drawn with ``seed`` (exact products)
    that ``graph`` has; 1.0 when the sampled nodes have none.

    Examples:
        >>> unit = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
        >>> edge_recall(build_knn_graph(unit, 0.5, k=1), unit, 0.5, sample=3)
        1.0
    """
    count = len(embeddings)
    generator = torch.Generator().manual_seed(seed)
    nodes = torch.randperm(count, generator=generator)[: min(sample, count)].to(embeddings.device)
    rows, cols, _ = similarity_edges(embeddings[nodes], embeddings, threshold, dtype=embeddings.dtype)
    rows = nodes[rows]
    other = rows != cols
    rows, cols = rows[other], cols[other]
    if len(rows) == 0:
        return 1.0
    stride = count
    have = graph.edge_index[0] * stride + graph.edge_index[1]
    return float(torch.isin(rows * stride + cols, have).float().mean())


def describe_build(stats: dict[str, object]) -> str:
    """One line naming the graph build of index ``stats``; a knn build says it is approximate, with recall.

    Examples:
        >>> describe_build({"graph_build": "knn", "knn_k": 64, "edge_recall": 0.987})
        'approximate k-NN build (k=64, Faiss): recall of above-threshold edges 0.987 on sampled nodes'
    """
    if stats.get("graph_build") != "knn":
        return "exact build: every pair above the threshold"
    return (
        f"approximate k-NN build (k={stats['knn_k']}, Faiss): recall of above-threshold edges "
        f"{stats['edge_recall']:.3f} on sampled nodes"
    )
