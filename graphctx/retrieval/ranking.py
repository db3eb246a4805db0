r"""The ranking rule of every retriever: score high to low, near-ties in pool order.

Within one query, scores sorted high to low fall into tie classes: a score within ``tolerance`` of the
one above it (:math:`s_{j-1} - s_j \le \tau`) is in its class, a larger gap starts a new one. Classes go
high to low and, inside a class, pool questions go by pool index (lowest first). Scores that differ only
in their last bits (other CPU kernels, the GPU, duplicate questions) thus rank alike; only a gap within
those few bits of :math:`\tau` itself can still order otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor


def tie_order(group: Tensor, score: Tensor, node: Tensor, tolerance: float) -> Tensor:
    """The permutation of the entries ``(group, score, node)`` that sorts them by group (ascending), then
    tie class of the score (high to low, see the module), then node (ascending).

    Examples:
        >>> group, score = torch.tensor([0, 0, 0, 1]), torch.tensor([0.5, 0.9, 0.9 + 1e-9, 0.1])
        >>> tie_order(group, score, torch.tensor([7, 3, 5, 1]), tolerance=1e-6).tolist()  # 0.9s tie: 3, 5
        [1, 2, 0, 3]
    """
    order = torch.argsort(score, descending=True, stable=True)
    order = order[torch.argsort(group[order], stable=True)]
    ranked_group, ranked_score = group[order], score[order]
    new_class = torch.ones(len(order), dtype=torch.bool, device=score.device)
    gap = ranked_score[:-1] - ranked_score[1:]
    new_class[1:] = (ranked_group[1:] != ranked_group[:-1]) | (gap > tolerance)
    tie_class = torch.cumsum(new_class.long(), 0)
    by_node = torch.argsort(node[order], stable=True)
    by_node = by_node[torch.argsort(tie_class[by_node], stable=True)]
    return order[by_node]


def rank_in_group(group: Tensor) -> Tensor:
    """Position of each entry within its group, for entries already sorted by group.

    Examples:
        >>> rank_in_group(torch.tensor([0, 0, 0, 2, 2, 5])).tolist()
        [0, 1, 2, 0, 1, 0]
    """
    position = torch.arange(len(group), device=group.device)
    is_first = torch.ones(len(group), dtype=torch.bool, device=group.device)
    is_first[1:] = group[1:] != group[:-1]
    return position - torch.cummax(torch.where(is_first, position, 0), dim=0).values


def top_k_with_ties(
    search: Callable[[int], tuple[Tensor, Tensor]], k: int, limit: int, tolerance: float
) -> tuple[Tensor, Tensor]:
    """The best ``k`` of ``limit`` candidates per row by the ranking rule, from ``search(n)``, which returns
    each row's ``n`` highest (scores [B, n], ids [B, n]). ``n`` grows from ``k + 8`` until every row's
    ``k``-th tie class ends inside its candidates (a gap above ``tolerance`` after position ``k``) or
    ``n = limit``, so the result is that of ranking all candidates.

    Examples:
        >>> scores = torch.tensor([[0.2, 0.9, 0.9, 0.4]])
        >>> def search(n):
        ...     best = scores.topk(n, dim=1)
        ...     return best.values, best.indices
        >>> top_k_with_ties(search, k=2, limit=4, tolerance=1e-6)[1].tolist()
        [[1, 2]]
    """
    k = min(k, limit)
    if k == 0:
        return search(0)
    take = min(k + 8, limit)
    while True:
        scores, ids = search(take)
        gaps = scores[:, k - 1 : take - 1] - scores[:, k:take] > tolerance
        if take == limit or len(scores) == 0 or bool(gaps.any(1).all()):
            break
        take = min(2 * take, limit)
    rows = torch.arange(len(scores), device=scores.device)[:, None].expand_as(scores).flatten()
    order = tie_order(rows, scores.flatten(), ids.flatten(), tolerance)
    keep = order[rank_in_group(rows[order]) < k]
    return scores.flatten()[keep].view(-1, k), ids.flatten()[keep].view(-1, k)
