r"""Forward push on a device by frontier rounds in torch (for the GPU, where one kernel launch serves
every query of a batch): each round pushes *every* node over the bound at once, on sorted
``(query, node)`` keys. Same result guarantee as :class:`~graphctx.retrieval.scale.push.PoolPush` (see
:mod:`~graphctx.retrieval.scale.push`); on the CPU that class's queue loops are far faster.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, scatter

from graphctx.retrieval.layout import QueryEdges
from graphctx.retrieval.pagerank import PageRankResult
from graphctx.retrieval.ranking import rank_in_group, tie_order


@dataclass
class PushState:
    """The touched (query, node) pairs of a batch, sorted by ``key = query * (N + 1) + node``."""

    key: Tensor
    """[M] long, sorted, unique."""
    estimate: Tensor
    """[M]: :math:`p`."""
    residual: Tensor
    """[M]: :math:`r`."""


class FrontierPush:
    r"""Forward-push personalized PageRank on the pool graph for any number of queries, in rounds:
    damping ``alpha``, residual tolerance ``eps`` (push while :math:`r_u > \varepsilon d_u`), at most
    ``max_rounds`` rounds, in ``dtype``, on the device of ``graph.edge_index``.

    Examples:
        >>> path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), edge_weight=torch.ones(4),
        ...             num_nodes=4)
        >>> query = QueryEdges(torch.tensor([0]), torch.tensor([2]), torch.tensor([1.0]), num_queries=1)
        >>> FrontierPush(path, eps=1e-9, dtype=torch.float64).rank(query, k=3).node_ids.tolist()
        [[2, 1, 0]]
    """

    def __init__(
        self,
        graph: Data,
        *,
        alpha: float = 0.85,
        eps: float = 1e-4,
        max_rounds: int = 10_000,
        dtype: torch.dtype = torch.float32,
        tie_tolerance: float = 1e-6,
    ) -> None:
        self.alpha, self.eps, self.max_rounds, self.dtype = alpha, eps, max_rounds, dtype
        self.tie_tolerance = tie_tolerance
        self.num_nodes = int(graph.num_nodes)
        self.device = graph.edge_index.device
        edge_index, weight = coalesce(graph.edge_index, graph.edge_weight.to(dtype), self.num_nodes)
        self.col, self.weight = edge_index[1], weight
        counts = torch.bincount(edge_index[0], minlength=self.num_nodes)
        self.rowptr = torch.zeros(self.num_nodes + 1, dtype=torch.long, device=self.device)
        self.rowptr[1:] = torch.cumsum(counts, 0)
        self.degree = scatter(weight, edge_index[0], dim_size=self.num_nodes, reduce="sum")

    def rank(self, edges: QueryEdges, k: int) -> PageRankResult:
        """Top-``k`` pool nodes per query by the pushed estimate; ``iterations`` counts push rounds and
        ``converged`` says the residual test held at the end (else ``max_rounds`` ran out)."""
        state, rounds, done = self.push(edges)
        stride = self.num_nodes + 1
        query, node = state.key // stride, state.key % stride
        pool = node < self.num_nodes
        ids, best = self._top_k(query[pool], node[pool], state.estimate[pool], edges.num_queries, k)
        linked = torch.bincount(edges.query, minlength=edges.num_queries) > 0
        iterations = torch.where(linked, rounds, torch.zeros_like(rounds))
        converged = torch.full_like(linked, done)
        return PageRankResult(ids, best, iterations, converged, linked)

    def push(self, edges: QueryEdges) -> tuple[PushState, Tensor, bool]:
        """The push state after convergence, push rounds per query [B] and whether all converged."""
        stride, num_queries = self.num_nodes + 1, edges.num_queries
        q_key = edges.query * stride + edges.node
        order = torch.argsort(q_key)
        q_key, q_weight = q_key[order], edges.weight.to(self.dtype)[order]
        q_query, q_node = edges.query[order], edges.node[order]
        q_degree = torch.zeros(num_queries, dtype=self.dtype, device=self.device)
        q_degree.index_add_(0, edges.query, edges.weight.to(self.dtype))
        linked = (q_degree > 0).nonzero()[:, 0]
        key = linked * stride + self.num_nodes
        one = torch.ones(len(key), dtype=self.dtype, device=self.device)
        state = PushState(key, torch.zeros_like(one), one)
        rounds = torch.zeros(num_queries, dtype=torch.long, device=self.device)
        for _ in range(self.max_rounds):
            degree, extra = self._degrees(state.key, q_key, q_weight, q_degree)
            active = state.residual > self.eps * degree
            if not bool(active.any()):
                return state, rounds, True
            rounds[torch.unique(state.key[active] // stride)] += 1
            mass = torch.where(active, state.residual, torch.zeros_like(state.residual))
            spread = self.alpha * mass[active] / degree[active]
            new_key, new_value = self._targets(
                state.key[active], spread, extra[active], (q_query, q_node, q_weight), num_queries
            )
            state.estimate = state.estimate + (1 - self.alpha) * mass
            state.residual = state.residual - mass
            state = self._merge(state, new_key, new_value)
        return state, rounds, False

    def _degrees(
        self, key: Tensor, q_key: Tensor, q_weight: Tensor, q_degree: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Weighted degree in the query's graph of each state entry, and the weight of its edge to the
        query node (0 when none)."""
        stride = self.num_nodes + 1
        query, node = key // stride, key % stride
        is_query = node == self.num_nodes
        degree = torch.where(is_query, q_degree[query], self.degree[node.clamp(max=self.num_nodes - 1)])
        if len(q_key) == 0:  # no query has an edge: the state is empty
            return degree, torch.zeros_like(degree)
        slot = torch.searchsorted(q_key, key).clamp(max=len(q_key) - 1)
        extra = torch.where(q_key[slot] == key, q_weight[slot], torch.zeros_like(degree))
        return degree + extra, extra

    def _targets(
        self,
        key: Tensor,
        spread: Tensor,
        extra: Tensor,
        query_edges: tuple[Tensor, Tensor, Tensor],
        num_queries: int,
    ) -> tuple[Tensor, Tensor]:
        """Keys and residual increments of the neighbours of the pushed entries: pool edges (CSR), the
        edge back to the query node, and the query node's own edges."""
        stride, q_query, q_node, q_weight = self.num_nodes + 1, *query_edges
        query, node = key // stride, key % stride
        is_query = node == self.num_nodes
        pool_node = node[~is_query]
        start, count = self.rowptr[pool_node], self.rowptr[pool_node + 1] - self.rowptr[pool_node]
        source = torch.repeat_interleave(torch.arange(len(pool_node), device=self.device), count)
        offset = torch.arange(len(source), device=self.device) - torch.repeat_interleave(
            torch.cumsum(count, 0) - count, count
        )
        edge = start[source] + offset
        pool_spread, pool_query = spread[~is_query], query[~is_query]
        keys = [pool_query[source] * stride + self.col[edge]]
        values = [pool_spread[source] * self.weight[edge]]
        back = extra[~is_query] > 0
        keys.append(pool_query[back] * stride + self.num_nodes)
        values.append(pool_spread[back] * extra[~is_query][back])
        from_query = torch.zeros(num_queries, dtype=self.dtype, device=self.device)
        from_query[query[is_query]] = spread[is_query]
        pick = from_query[q_query] > 0
        keys.append(q_query[pick] * stride + q_node[pick])
        values.append(from_query[q_query[pick]] * q_weight[pick])
        return torch.cat(keys), torch.cat(values)

    @staticmethod
    def _merge(state: PushState, key: Tensor, value: Tensor) -> PushState:
        """``state`` with ``value`` added to the residuals at ``key`` (new entries appear)."""
        all_key, inverse = torch.unique(torch.cat([state.key, key]), return_inverse=True)
        old = inverse[: len(state.key)]
        estimate = torch.zeros(len(all_key), dtype=state.estimate.dtype, device=all_key.device)
        estimate[old] = state.estimate
        residual = torch.zeros_like(estimate).index_add_(0, old, state.residual)
        residual.index_add_(0, inverse[len(state.key) :], value)
        return PushState(all_key, estimate, residual)

    def _top_k(
        self, query: Tensor, node: Tensor, score: Tensor, num_queries: int, k: int
    ) -> tuple[Tensor, Tensor]:
        """Best ``k`` pool nodes per query (padded -1 / 0), near-ties in pool order."""
        ids = torch.full((num_queries, k), -1, dtype=torch.long, device=self.device)
        best = torch.zeros(num_queries, k, dtype=self.dtype, device=self.device)
        order = tie_order(query, score, node, self.tie_tolerance)
        owner = query[order]
        rank = rank_in_group(owner)
        keep = rank < k
        ids[owner[keep], rank[keep]] = node[order[keep]]
        best[owner[keep], rank[keep]] = score[order[keep]]
        return ids, best
