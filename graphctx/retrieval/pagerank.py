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

import numpy as np
import scipy.sparse
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, cumsum, scatter, to_torch_csr_tensor

from graphctx.retrieval.ranking import rank_in_group, tie_order
from graphctx.retrieval.settings import RetrievalSettings


def csr_adjacency(edge_index: Tensor, weight: Tensor, size: tuple[int, int]) -> Tensor:
    """The sparse CSR matrix of coalesced, row-sorted edges, with torch's sparse invariant checks explicitly
    off: the indices are built here in range and sorted, so checking them would only cost time (and torch
    warns when the choice is left implicit)."""
    with torch.sparse.check_sparse_tensor_invariants(enable=False):
        return to_torch_csr_tensor(edge_index, weight, size=size, is_coalesced=True)


@dataclass
class QueryEdges:
    """Edges from query nodes to pool nodes (queries never link to each other)."""

    query: Tensor
    """[E] long: query index in ``0..num_queries-1``."""
    node: Tensor
    """[E] long: pool node index."""
    weight: Tensor
    """[E]: edge weight (the cosine)."""
    num_queries: int
    """Queries in the batch, including those without edges."""


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


@dataclass
class _Layout:
    """One batch laid out for the power iteration: ``n`` node slots × ``m`` columns."""

    adjacency: Tensor  # sparse CSR [n, n], symmetric pool weights between slots
    slot_node: Tensor  # [n] pool node of each slot
    slot_query: Tensor | None  # [n] query owning each slot (blocks), None when shared by all columns
    num_columns: int
    edge_row: Tensor  # query edges as (slot, column, query, weight)
    edge_col: Tensor
    edge_query: Tensor
    edge_weight: Tensor
    outside_error: Tensor | None  # [B, max_iter] L1 change of the components left out of the layout
    outside_dangling: Tensor | None  # [B] dangling mass outside the layout at t = 0
    slot_copy: Tensor | None = None  # shared: [n] which component copy each slot is in
    edge_copy: Tensor | None = None  # shared: [E] which component copy each query edge reaches

    def reduce(self, values: Tensor, num_queries: int) -> Tensor:
        """Sum ``values`` [n, m] per query → [B]."""
        if self.slot_query is None:
            return values.sum(0)
        return torch.zeros(num_queries, dtype=values.dtype, device=values.device).index_add_(
            0, self.slot_query, values[:, 0]
        )

    def expand(self, per_query: Tensor) -> Tensor:
        """Broadcast a per-query tensor [B] to the [n, m] layout."""
        if self.slot_query is None:
            return per_query[None, :]
        return per_query[self.slot_query][:, None]


def label_propagation_components(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Component labels by min-label propagation with pointer jumping (runs on the GPU, stays there).

    Each round sets ``label[v] = min(label[v], min over edges (v, u) of label[u])`` and then
    ``label = label[label]``; labels stay node ids of the same component and only decrease, so they settle
    on each component's smallest node id. Returned renumbered to ``0..K-1`` in order of that id.
    """
    label = torch.arange(num_nodes, device=edge_index.device)
    row, col = edge_index
    while True:
        update = label.scatter_reduce(0, row, label[col], reduce="amin", include_self=True)
        update = update[update]
        if torch.equal(update, label):
            return torch.unique(label, return_inverse=True)[1]
        label = update


def connected_components(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Component label (``0..K-1``) of every node of an undirected graph: scipy's on the CPU,
    :func:`label_propagation_components` on CUDA (no round trip of the edges to the host)."""
    if edge_index.is_cuda:
        return label_propagation_components(edge_index, num_nodes)
    row, col = edge_index.cpu().numpy()
    matrix = scipy.sparse.coo_matrix((np.ones(len(row), dtype=np.int8), (row, col)), (num_nodes, num_nodes))
    _, labels = scipy.sparse.csgraph.connected_components(matrix, directed=False)
    return torch.from_numpy(labels).long().to(edge_index.device)


class PoolPageRank:
    """The pool graph prepared once for personalized PageRank of any number of queries.

    ``graph`` is a :class:`torch_geometric.data.Data` with an undirected ``edge_index`` (both directions
    present), ``edge_weight`` and ``num_nodes``. Runs on the device of ``graph.edge_index``.
    """

    def __init__(self, graph: Data, settings: RetrievalSettings) -> None:
        self.settings = settings
        self.dtype = getattr(torch, settings.pagerank_dtype)
        self.num_nodes = int(graph.num_nodes)
        self.device = graph.edge_index.device
        num_nodes = self.num_nodes
        edge_index, exact_weight = coalesce(graph.edge_index, graph.edge_weight.to(torch.float64), num_nodes)
        weight = exact_weight.to(self.dtype)
        self.degree = scatter(weight, edge_index[0], dim_size=num_nodes, reduce="sum")

        # Nodes and edges grouped by component, so a component's nodes and edges are contiguous ranges.
        self.component = connected_components(edge_index, num_nodes)
        num_components = int(self.component.max()) + 1 if num_nodes else 0
        self.component_size = torch.bincount(self.component, minlength=num_components)
        self.component_ptr = cumsum(self.component_size)
        self.component_nodes = torch.argsort(self.component, stable=True)
        self.position = torch.empty_like(self.component_nodes)
        self.position[self.component_nodes] = (
            torch.arange(num_nodes, device=self.device)
            - self.component_ptr[self.component[self.component_nodes]]
        )
        edge_component = self.component[edge_index[0]]
        edge_order = torch.argsort(edge_component, stable=True)
        self.edge_local = self.position[edge_index[:, edge_order]]
        self.edge_weight = weight[edge_order]
        self.component_edge_ptr = cumsum(torch.bincount(edge_component, minlength=num_components))
        self._residual_error, self._residual_dangling = self._residuals(
            edge_index, exact_weight, num_components
        )
        self._total_residual_error = self._residual_error.sum(0)
        self._total_residual_dangling = self._residual_dangling[:, 0].sum()

    def _residuals(self, edge_index: Tensor, weight: Tensor, num_components: int) -> tuple[Tensor, Tensor]:
        r"""Per component and step, the L1 change and dangling mass of :math:`z_{t+1} = \alpha z_t P`,
        :math:`z_0 = 1/N'`: what a component no query edge touches contributes to networkx's loop.

        Float64 [components, max_iter] each (the dangling part is non-zero only for isolated nodes at t=0).
        """
        alpha, steps = self.settings.alpha, self.settings.max_iter
        size = (self.num_nodes, self.num_nodes)
        adjacency = csr_adjacency(edge_index, weight, size)
        degree = scatter(weight, edge_index[0], dim_size=self.num_nodes, reduce="sum")
        inv_degree = torch.where(degree > 0, 1.0 / degree, torch.zeros_like(degree))
        isolated = (degree == 0).to(torch.float64)
        z = torch.full((self.num_nodes,), 1.0 / (self.num_nodes + 1), dtype=torch.float64, device=self.device)
        error = torch.zeros(num_components, steps, dtype=torch.float64, device=self.device)
        dangling = torch.zeros_like(error)
        for step in range(steps):
            dangling[:, step] = scatter(z * isolated, self.component, dim_size=num_components)
            z_next = alpha * (adjacency @ (z * inv_degree)[:, None])[:, 0]
            error[:, step] = scatter((z_next - z).abs(), self.component, dim_size=num_components)
            z = z_next
        return error, dangling

    def run(self, edges: QueryEdges, top_k: int | None = None) -> PageRankResult:
        """Top-k pool nodes by personalized PageRank for every query of ``edges``."""
        k = self.settings.top_k if top_k is None else top_k
        num_queries = edges.num_queries
        node_ids = torch.full((num_queries, k), -1, dtype=torch.long, device=self.device)
        scores = torch.zeros(num_queries, k, dtype=self.dtype, device=self.device)
        iterations = torch.zeros(num_queries, dtype=torch.long, device=self.device)
        converged = torch.ones(num_queries, dtype=torch.bool, device=self.device)
        linked = torch.bincount(edges.query, minlength=num_queries) > 0
        for queries, layout in self._layouts(edges):
            x, _, steps, done = self._iterate(layout, len(queries))
            iterations[queries], converged[queries] = steps, done
            ids, best = self._top_k(layout, x, len(queries), k)
            node_ids[queries], scores[queries] = ids, best
        if not bool(converged.all()):
            failed = (~converged).nonzero()[:, 0].tolist()
            warnings.warn(
                f"personalized PageRank did not converge within max_iter={self.settings.max_iter} for "
                f"{len(failed)} queries (first: {failed[:5]}); their scores are the last iterate",
                RuntimeWarning,
                stacklevel=2,
            )
        return PageRankResult(node_ids, scores, iterations, converged, linked)

    def all_scores(self, edges: QueryEdges) -> PageRankScores:
        """Every score the iteration computes (for checking against networkx; memory grows with it)."""
        parts: list[tuple[Tensor, Tensor, Tensor]] = []
        query_score = torch.zeros(edges.num_queries, dtype=self.dtype, device=self.device)
        for queries, layout in self._layouts(edges):
            x, xq, _, _ = self._iterate(layout, len(queries))
            query_score[queries] = xq
            if layout.slot_query is None:
                slot, column = torch.meshgrid(
                    torch.arange(x.shape[0], device=self.device),
                    torch.arange(x.shape[1], device=self.device),
                    indexing="ij",
                )
                parts.append((queries[column.flatten()], layout.slot_node[slot.flatten()], x.flatten()))
            else:
                parts.append((queries[layout.slot_query], layout.slot_node, x[:, 0]))
        empty = torch.zeros(0, dtype=torch.long, device=self.device)
        query, node, score = (
            (torch.cat(p) for p in zip(*parts, strict=True)) if parts else (empty, empty, empty)
        )
        return PageRankScores(query, node, score, query_score)

    def _layouts(self, edges: QueryEdges):
        """Group the linked queries into layouts within the memory bound ``settings.max_batch_slots``.

        A query whose largest touched component has more than ``settings.shared_component_nodes`` nodes
        joins the other queries of that component as one column each over a single copy of their
        components; the rest get private block copies.
        """
        settings = self.settings
        num_components = len(self.component_size)
        pair_query, pair_component = self._query_components(edges)
        pair_size = self.component_size[pair_component]
        component_edges = self.component_edge_ptr[1:] - self.component_edge_ptr[:-1]
        copied = torch.zeros(edges.num_queries, dtype=torch.long, device=self.device)
        copied.index_add_(0, pair_query, pair_size + component_edges[pair_component])
        largest = torch.full((edges.num_queries,), -1, dtype=torch.long, device=self.device)
        largest.scatter_reduce_(0, pair_query, pair_size * num_components + pair_component, reduce="amax")
        linked = largest >= 0
        shared = linked & (largest // num_components > settings.shared_component_nodes)

        block_queries = (linked & ~shared).nonzero()[:, 0]
        if len(block_queries):
            budget = torch.cumsum(copied[block_queries], 0) // max(settings.max_batch_slots, 1)
            for group in torch.unique_consecutive(budget):
                queries = block_queries[budget == group]
                yield queries, self._block_layout(edges, queries)

        shared_queries = shared.nonzero()[:, 0]
        shared_queries = shared_queries[torch.argsort(largest[shared_queries], stable=True)]
        _, group_sizes = torch.unique_consecutive(largest[shared_queries], return_counts=True)
        for group in torch.split(shared_queries, group_sizes.tolist()):
            in_group = torch.isin(pair_query, group)
            nodes = int(self.component_size[torch.unique(pair_component[in_group])].sum())
            columns = max(1, min(settings.query_batch_size, settings.max_batch_slots // nodes))
            for queries in torch.split(group, columns):
                yield queries, self._shared_layout(edges, queries)

    def _query_components(self, edges: QueryEdges) -> tuple[Tensor, Tensor]:
        """Unique (query, component) pairs: the components each query touches, sorted by query."""
        num_components = len(self.component_size)
        key = torch.unique(edges.query * num_components + self.component[edges.node])
        return key // num_components, key % num_components

    def _select_edges(self, edges: QueryEdges, queries: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The edges of ``queries``, with the query renumbered to its position in ``queries``."""
        local = torch.full((edges.num_queries,), -1, dtype=torch.long, device=self.device)
        local[queries] = torch.arange(len(queries), device=self.device)
        keep = local[edges.query] >= 0
        return local[edges.query[keep]], edges.node[keep], edges.weight[keep].to(self.dtype)

    def _copy_components(self, components: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Lay copies of ``components`` (repeats allowed) one after another: (offset of each copy [P],
        copy of each slot [n], pool node of each slot [n], block-diagonal CSR adjacency [n, n])."""
        arange = torch.arange(len(components), device=self.device)
        sizes = self.component_size[components]
        offset = cumsum(sizes)
        num_slots = int(offset[-1])
        slot_copy = torch.repeat_interleave(arange, sizes)
        slot_local = torch.arange(num_slots, device=self.device) - offset[slot_copy]
        slot_node = self.component_nodes[self.component_ptr[components[slot_copy]] + slot_local]

        edge_counts = self.component_edge_ptr[components + 1] - self.component_edge_ptr[components]
        edge_copy = torch.repeat_interleave(arange, edge_counts)
        edge_offset = cumsum(edge_counts)
        edge_id = (
            self.component_edge_ptr[components[edge_copy]]
            + torch.arange(int(edge_offset[-1]), device=self.device)
            - edge_offset[edge_copy]
        )
        # Rows ascend (copies in order, nodes in id order within a component): no sort needed.
        adjacency = csr_adjacency(
            self.edge_local[:, edge_id] + offset[edge_copy], self.edge_weight[edge_id], (num_slots, num_slots)
        )
        return offset, slot_copy, slot_node, adjacency

    def _block_layout(self, edges: QueryEdges, queries: Tensor) -> _Layout:
        """Each query gets a private copy of the components it touches, laid out block-diagonally."""
        query, node, weight = self._select_edges(edges, queries)
        num_components = len(self.component_size)
        key, inverse = torch.unique(query * num_components + self.component[node], return_inverse=True)
        pair_query, pair_component = key // num_components, key % num_components
        pair_offset, slot_pair, slot_node, adjacency = self._copy_components(pair_component)
        inside_error = scatter(self._residual_error[pair_component], pair_query, dim=0, dim_size=len(queries))
        inside_dangling = scatter(
            self._residual_dangling[pair_component, 0], pair_query, dim_size=len(queries)
        )
        return _Layout(
            adjacency=adjacency,
            slot_node=slot_node,
            slot_query=pair_query[slot_pair],
            num_columns=1,
            edge_row=pair_offset[inverse] + self.position[node],
            edge_col=torch.zeros_like(node),
            edge_query=query,
            edge_weight=weight,
            outside_error=(self._total_residual_error[None, :] - inside_error).clamp_min(0),
            outside_dangling=self._total_residual_dangling - inside_dangling,
        )

    def _shared_layout(self, edges: QueryEdges, queries: Tensor) -> _Layout:
        """One copy of all components the queries touch; each query is one column over it."""
        query, node, weight = self._select_edges(edges, queries)
        components = torch.unique(self.component[node])
        offset, slot_copy, slot_node, adjacency = self._copy_components(components)
        copy_of_edge = torch.searchsorted(components, self.component[node])
        inside_error = self._residual_error[components].sum(0)
        inside_dangling = self._residual_dangling[components, 0].sum()
        return _Layout(
            adjacency=adjacency,
            slot_node=slot_node,
            slot_query=None,
            num_columns=len(queries),
            edge_row=offset[copy_of_edge] + self.position[node],
            edge_col=query,
            edge_query=query,
            edge_weight=weight,
            outside_error=(self._total_residual_error - inside_error)
            .clamp_min(0)[None, :]
            .expand(len(queries), -1),
            outside_dangling=(self._total_residual_dangling - inside_dangling).expand(len(queries)),
            slot_copy=slot_copy,
            edge_copy=copy_of_edge,
        )

    def _iterate(self, layout: _Layout, num_queries: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """networkx's power iteration for every query of the layout at once.

        Returns pool-slot scores [n, m], query-node scores [B], iterations [B] and converged [B].
        """
        alpha, tol, dtype, device = self.settings.alpha, self.settings.tol, self.dtype, self.device
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
        for step in range(self.settings.max_iter):
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

    def _top_k(self, layout: _Layout, x: Tensor, num_queries: int, k: int) -> tuple[Tensor, Tensor]:
        """Best ``k`` pool nodes per query (padded with -1 / 0), near-ties within
        ``settings.tie_tolerance`` in pool order (:func:`~graphctx.retrieval.ranking.tie_order`)."""
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
        order = tie_order(owner, scores, nodes, self.settings.tie_tolerance)
        owner = owner[order]
        rank = rank_in_group(owner)
        keep = rank < k
        ids[owner[keep], rank[keep]] = nodes[order[keep]]
        best[owner[keep], rank[keep]] = scores[order[keep]]
        return ids, best
