r"""Batched personalized PageRank with exactly networkx's semantics, for many queries at once.

For query :math:`q` the graph :math:`G'_q` is the pool graph plus one node :math:`q` linked to the pool
nodes it is similar to (:math:`N' = N + 1` nodes). ``networkx.pagerank(G'_q, alpha, personalization={q: 1},
weight="weight")`` starts from :math:`x_0 = 1/N'` everywhere and iterates

.. math::
    x_{t+1} = \alpha\,\bigl(x_t P + (\textstyle\sum_{i\ \mathrm{dangling}} x_{t,i})\, e_q\bigr)
              + (1-\alpha)\, e_q, \qquad P_{ij} = w_{ij} / \textstyle\sum_j w_{ij},

stopping at the first :math:`t` with :math:`\lVert x_{t+1} - x_t\rVert_1 < N'\cdot\mathrm{tol}`. Here every
query of a batch is one column of the same iteration; the query's own edges only change the degree of
its neighbours, applied as a sparse correction.

Exactness trick: no mass ever enters a connected component that :math:`q` does not touch (its nodes are
not dangling, and teleport and dangling mass go to :math:`q`). Those components evolve from
:math:`1/N'` by :math:`z_{t+1} = \alpha z_t P` whatever the query is, so their contributions to the
L1 change (and to the dangling mass, through isolated nodes at :math:`t = 0`) are computed once per pool,
per component. A query touching small components is then iterated over a private copy of just those
components ("blocks", laid out block-diagonally with other queries), and only queries reaching a huge
component are iterated over the whole pool ("shared", one column each). Both layouts give networkx's
numbers; scores of untouched components are the query-independent residual above and are not ranked.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, scatter

from graphctx.retrieval.components import PoolComponents, csr_adjacency
from graphctx.retrieval.layout import Layout, Layouts, QueryEdges, Residuals
from graphctx.retrieval.ranking import rank_in_group, tie_order

__all__ = ["PageRankResult", "PageRankScores", "PoolPageRank", "QueryEdges", "Ranker", "untouched_residuals"]


@dataclass
class PageRankResult:
    """Per-query ranking of pool nodes."""

    node_ids: Tensor
    """[B, k] long: best pool nodes, best first; -1 where the query reaches fewer than k pool nodes."""
    scores: Tensor
    """[B, k]: their PageRank scores (0 where ``node_ids`` is -1)."""
    iterations: Tensor
    """[B] long: power iterations until convergence (0 for a query without edges)."""
    converged: Tensor
    """[B] bool: whether the L1 change fell below ``N' * tol`` within ``max_iter``."""
    linked: Tensor
    """[B] bool: whether the query has any edge (otherwise all its mass stays on itself)."""


class Ranker(Protocol):
    """What ranks pool nodes for queries: :class:`PoolPageRank`, or a scale mode's forward push
    (:mod:`graphctx.retrieval.scale.push`)."""

    def rank(self, edges: QueryEdges, k: int) -> PageRankResult:
        """Top-``k`` pool nodes for every query of ``edges``."""
        ...


@dataclass
class PageRankScores:
    """Every computed score: the nodes of each query's components and the query node itself."""

    query: Tensor
    """[M] long."""
    node: Tensor
    """[M] long: pool node."""
    score: Tensor
    """[M]."""
    query_score: Tensor
    """[B]: score of each query's own node."""


def untouched_residuals(
    edge_index: Tensor, weight: Tensor, parts: PoolComponents, alpha: float, max_iter: int
) -> Residuals:
    r"""Per component and step, the L1 change and dangling mass of :math:`z_{t+1} = \alpha z_t P`,
    :math:`z_0 = 1/N'`: what a component no query edge touches contributes to networkx's loop.

    ``weight`` is float64, and so are the results ([components, max_iter] each).
    """
    num_nodes, count, device = len(parts.label), len(parts), edge_index.device
    adjacency = csr_adjacency(edge_index, weight, (num_nodes, num_nodes))
    degree = scatter(weight, edge_index[0], dim_size=num_nodes, reduce="sum")
    inv_degree = torch.where(degree > 0, 1.0 / degree, torch.zeros_like(degree))
    isolated = (degree == 0).to(torch.float64)
    z = torch.full((num_nodes,), 1.0 / (num_nodes + 1), dtype=torch.float64, device=device)
    error = torch.zeros(count, max_iter, dtype=torch.float64, device=device)
    dangling = torch.zeros_like(error)
    for step in range(max_iter):
        dangling[:, step] = scatter(z * isolated, parts.label, dim_size=count)
        z_next = alpha * (adjacency @ (z * inv_degree)[:, None])[:, 0]
        error[:, step] = scatter((z_next - z).abs(), parts.label, dim_size=count)
        z = z_next
    return Residuals(error, dangling)


class PoolPageRank:
    r"""The pool graph prepared once for networkx-exact personalized PageRank of any number of queries
    (the iteration of the module docstring, damping ``alpha``, stop at L1 change :math:`< N' \cdot` ``tol``
    or after ``max_iter`` steps, in ``dtype``).

    ``graph`` is a :class:`torch_geometric.data.Data` with an undirected ``edge_index`` (both directions
    present), ``edge_weight`` and ``num_nodes``; runs on the device of ``graph.edge_index``. Scores closer
    than ``tie_tolerance`` rank in pool order (:mod:`~graphctx.retrieval.ranking`). ``max_batch_slots``,
    ``shared_component_nodes`` and ``max_columns`` only cut queries into batches
    (:class:`~graphctx.retrieval.layout.Layouts`): memory and speed, not the numbers.

    Examples:
        >>> from torch_geometric.data import Data
        >>> path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), edge_weight=torch.ones(4),
        ...             num_nodes=4)
        >>> ranker = PoolPageRank(path, dtype=torch.float64)
        >>> query = QueryEdges(torch.tensor([0]), torch.tensor([2]), torch.tensor([1.0]), num_queries=1)
        >>> result = ranker.rank(query, k=3)
        >>> result.node_ids.tolist(), [round(score, 4) for score in result.scores[0].tolist()]
        ([[2, 1, 0]], [0.3582, 0.2383, 0.1013])
    """

    def __init__(
        self,
        graph: Data,
        *,
        alpha: float = 0.85,
        tol: float = 1e-6,
        max_iter: int = 100,
        dtype: torch.dtype = torch.float32,
        tie_tolerance: float = 1e-6,
        max_batch_slots: int = 1 << 24,
        shared_component_nodes: int = 1024,
        max_columns: int = 1024,
    ) -> None:
        self.alpha, self.tol, self.max_iter, self.dtype = alpha, tol, max_iter, dtype
        self.tie_tolerance = tie_tolerance
        self.num_nodes = int(graph.num_nodes)
        self.device = graph.edge_index.device
        edge_index, exact_weight = coalesce(
            graph.edge_index, graph.edge_weight.to(torch.float64), self.num_nodes
        )
        weight = exact_weight.to(dtype)
        self.degree = scatter(weight, edge_index[0], dim_size=self.num_nodes, reduce="sum")
        self.parts = PoolComponents(edge_index, weight, self.num_nodes)
        residuals = untouched_residuals(edge_index, exact_weight, self.parts, alpha, max_iter)
        self.layouts = Layouts(
            self.parts,
            residuals,
            dtype=dtype,
            max_batch_slots=max_batch_slots,
            shared_component_nodes=shared_component_nodes,
            max_columns=max_columns,
        )

    def rank(self, edges: QueryEdges, k: int) -> PageRankResult:
        """Top-``k`` pool nodes by personalized PageRank for every query of ``edges``; a warning names the
        queries still changing after ``max_iter`` steps."""
        num_queries = edges.num_queries
        node_ids = torch.full((num_queries, k), -1, dtype=torch.long, device=self.device)
        scores = torch.zeros(num_queries, k, dtype=self.dtype, device=self.device)
        iterations = torch.zeros(num_queries, dtype=torch.long, device=self.device)
        converged = torch.ones(num_queries, dtype=torch.bool, device=self.device)
        linked = torch.bincount(edges.query, minlength=num_queries) > 0
        for queries, layout in self.layouts(edges):
            x, _, steps, done = self._iterate(layout, len(queries))
            iterations[queries], converged[queries] = steps, done
            ids, best = self._top_k(layout, x, len(queries), k)
            node_ids[queries], scores[queries] = ids, best
        if not bool(converged.all()):
            failed = (~converged).nonzero()[:, 0].tolist()
            warnings.warn(
                f"personalized PageRank did not converge within max_iter={self.max_iter} for "
                f"{len(failed)} queries (first: {failed[:5]}); their scores are the last iterate",
                RuntimeWarning,
                stacklevel=2,
            )
        return PageRankResult(node_ids, scores, iterations, converged, linked)

    def all_scores(self, edges: QueryEdges) -> PageRankScores:
        """Every score the iteration computes (for checking against networkx; memory grows with it)."""
        pieces: list[tuple[Tensor, Tensor, Tensor]] = []
        query_score = torch.zeros(edges.num_queries, dtype=self.dtype, device=self.device)
        for queries, layout in self.layouts(edges):
            x, xq, _, _ = self._iterate(layout, len(queries))
            query_score[queries] = xq
            if layout.slot_query is None:
                slot, column = torch.meshgrid(
                    torch.arange(x.shape[0], device=self.device),
                    torch.arange(x.shape[1], device=self.device),
                    indexing="ij",
                )
                pieces.append((queries[column.flatten()], layout.slot_node[slot.flatten()], x.flatten()))
            else:
                pieces.append((queries[layout.slot_query], layout.slot_node, x[:, 0]))
        empty = torch.zeros(0, dtype=torch.long, device=self.device)
        query, node, score = (
            (torch.cat(p) for p in zip(*pieces, strict=True)) if pieces else (empty, empty, empty)
        )
        return PageRankScores(query, node, score, query_score)

    def _iterate(self, layout: Layout, num_queries: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """networkx's power iteration for every query of the layout at once.

        Returns pool-slot scores [n, m], query-node scores [B], iterations [B] and converged [B].
        """
        alpha, tol, dtype, device = self.alpha, self.tol, self.dtype, self.device
        total_nodes = self.num_nodes + 1
        degree = self.degree[layout.slot_node]
        inv_degree = torch.where(degree > 0, 1.0 / degree, torch.zeros_like(degree))[:, None]
        isolated = (degree == 0).to(dtype)[:, None]
        row, col, query, weight = layout.edge_row, layout.edge_col, layout.edge_query, layout.edge_weight
        edge_degree = degree[row] + weight  # a neighbour's degree once the query's edge is added
        edge_isolated = (degree[row] == 0).to(dtype)
        query_degree = torch.zeros(num_queries, dtype=dtype, device=device).index_add_(0, query, weight)

        x = torch.full(
            (len(layout.slot_node), layout.num_columns), 1.0 / total_nodes, dtype=dtype, device=device
        )
        xq = torch.full((num_queries,), 1.0 / total_nodes, dtype=dtype, device=device)
        active = torch.ones(num_queries, dtype=torch.bool, device=device)
        iterations = torch.zeros(num_queries, dtype=torch.long, device=device)
        for step in range(self.max_iter):
            x_at_edges = x[row, col]
            y = x * inv_degree
            y[row, col] = x_at_edges / edge_degree
            flow = layout.adjacency @ y
            flow.index_put_((row, col), (xq / query_degree)[query] * weight, accumulate=True)
            flow_to_query = torch.zeros_like(xq).index_add_(0, query, y[row, col] * weight)
            dangling = layout.reduce(x * isolated, num_queries) - torch.zeros_like(xq).index_add_(
                0, query, x_at_edges * edge_isolated
            )
            if step == 0 and layout.outside_dangling is not None:
                dangling = dangling + layout.outside_dangling.to(dtype)
            x_next = alpha * flow
            xq_next = alpha * (flow_to_query + dangling) + (1 - alpha)
            error = layout.reduce((x_next - x).abs(), num_queries) + (xq_next - xq).abs()
            if layout.outside_error is not None:
                error = error + layout.outside_error[:, step].to(dtype)
            x = torch.where(layout.expand(active), x_next, x)
            xq = torch.where(active, xq_next, xq)
            iterations += active.long()
            active &= ~(error < total_nodes * tol)
            if not bool(active.any()):
                break
        return x, xq, iterations, ~active

    def _top_k(self, layout: Layout, x: Tensor, num_queries: int, k: int) -> tuple[Tensor, Tensor]:
        """Best ``k`` pool nodes per query (padded with -1 / 0), near-ties within
        ``tie_tolerance`` in pool order (:func:`~graphctx.retrieval.ranking.tie_order`)."""
        ids = torch.full((num_queries, k), -1, dtype=torch.long, device=self.device)
        best = torch.zeros(num_queries, k, dtype=x.dtype, device=self.device)
        if layout.slot_query is None:
            # Rank only the components each column's query touches (elsewhere: leftover mass, see top).
            num_copies = int(layout.slot_copy.max()) + 1
            touched = torch.zeros(num_copies, x.shape[1], dtype=torch.bool, device=self.device)
            touched[layout.edge_copy, layout.edge_col] = True
            slot, owner = touched[layout.slot_copy].nonzero(as_tuple=True)
            scores, nodes = x[slot, owner], layout.slot_node[slot]
        else:
            owner, scores, nodes = layout.slot_query, x[:, 0], layout.slot_node
        order = tie_order(owner, scores, nodes, self.tie_tolerance)
        owner = owner[order]
        rank = rank_in_group(owner)
        keep = rank < k
        ids[owner[keep], rank[keep]] = nodes[order[keep]]
        best[owner[keep], rank[keep]] = scores[order[keep]]
        return ids, best
