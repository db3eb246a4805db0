r"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009) of several rankings of the pool.

Each ranking :math:`r` gives pool node :math:`d` at 1-based rank :math:`\mathrm{rank}_r(d)` the score
:math:`1 / (c + \mathrm{rank}_r(d))` (0 when :math:`r` does not rank :math:`d`); the fused ranking sorts
nodes by the sum over rankings, high to low, ties by pool index. Only ranks enter, so rankings on
incomparable scales (PageRank probabilities, BM25 scores) fuse without calibration; :math:`c = 60` is
the constant of the paper, where it was robust across collections.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def reciprocal_rank_fusion(rankings: Sequence[Tensor], k: int, c: float = 60.0) -> tuple[Tensor, Tensor]:
    """Fuse rankings of the same queries: each ``[B, n_r]`` long tensor of pool nodes, best first, ``-1``
    for empty slots. Returns the fused top ``k`` (scores [B, k], nodes [B, k]; node -1 past the nodes any
    ranking holds).

    Examples:
        >>> bm25 = torch.tensor([[3, 1, -1]])
        >>> ppr = torch.tensor([[1, 2, 0]])
        >>> scores, nodes = reciprocal_rank_fusion([bm25, ppr], k=4, c=1.0)
        >>> nodes.tolist()  # 1: 1/3 + 1/2; 3: 1/2; 2: 1/3; 0: 1/4
        [[1, 3, 2, 0]]
    """
    rows = rankings[0].shape[0]
    queries, nodes, scores = [], [], []
    for ranking in rankings:
        query, rank = (ranking >= 0).nonzero(as_tuple=True)
        queries.append(query)
        nodes.append(ranking[query, rank])
        scores.append(1.0 / (c + rank.double() + 1))
    query, node, score = torch.cat(queries), torch.cat(nodes), torch.cat(scores)
    width = int(node.max()) + 1 if len(node) else 1
    pair, inverse = torch.unique(query * width + node, return_inverse=True)
    total = torch.zeros(len(pair), dtype=torch.float64).index_add_(0, inverse, score)
    pair_query, pair_node = pair // width, pair % width
    # sort by query, then fused score (high first), then node: three stable sorts
    order = torch.argsort(pair_node, stable=True)
    order = order[torch.argsort(total[order], descending=True, stable=True)]
    order = order[torch.argsort(pair_query[order], stable=True)]
    out_nodes = torch.full((rows, k), -1, dtype=torch.long)
    out_scores = torch.zeros(rows, k, dtype=torch.float64)
    ranked_query = pair_query[order]
    first = torch.searchsorted(ranked_query, ranked_query, side="left")
    position = torch.arange(len(order)) - first
    keep = position < k
    out_nodes[ranked_query[keep], position[keep]] = pair_node[order][keep]
    out_scores[ranked_query[keep], position[keep]] = total[order][keep]
    return out_scores, out_nodes
