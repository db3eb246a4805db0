"""Which queries personalized PageRank iterates together, and over which copies of the pool's components.

A query's mass stays in the components its edges touch (:mod:`graphctx.retrieval.pagerank`), so each
batch is laid out as ``n`` node slots × ``m`` columns holding copies of just those components:

* **blocks** (``m = 1``): every query gets a private copy of its components, laid out block-diagonally
  beside the other queries' copies (cheap when the components are small);
* **shared** (one column per query): queries whose largest touched component has more than
  ``shared_component_nodes`` nodes share a single copy of their components, one column each.

Batches are cut so that a batch holds at most ``max_batch_slots`` node + edge copies (blocks) or
nodes × columns (shared). Both layouts give the same numbers; they differ only in memory and speed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric.utils import scatter

from graphctx.retrieval.components import PoolComponents


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
class Residuals:
    r"""What the components no query touches add to networkx's loop, per component and step (float64
    [components, max_iter]): the L1 change of :math:`z_{t+1} = \alpha z_t P` and its dangling mass (non-zero
    only for isolated nodes at :math:`t = 0`), with both summed over all components."""

    error: Tensor
    dangling: Tensor

    def __post_init__(self) -> None:
        self.total_error = self.error.sum(0)
        self.total_dangling = self.dangling[:, 0].sum()


@dataclass
class Layout:
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


class Layouts:
    """Cuts the linked queries of :class:`QueryEdges` into batches and lays each out (see the module).

    ``dtype`` is the iteration's; ``max_columns`` bounds the queries of one shared batch.

    Examples:
        >>> from graphctx.retrieval.components import PoolComponents
        >>> from graphctx.retrieval.pagerank import untouched_residuals
        >>> edge_index = torch.tensor([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])  # path 0-1-2, pair 3-4
        >>> parts = PoolComponents(edge_index, torch.ones(6), num_nodes=5)
        >>> residuals = untouched_residuals(edge_index, torch.ones(6, dtype=torch.float64), parts, 0.85, 9)
        >>> layouts = Layouts(parts, residuals, dtype=torch.float32, max_batch_slots=100,
        ...                   shared_component_nodes=2, max_columns=8)
        >>> edges = QueryEdges(torch.tensor([0, 1, 2]), torch.tensor([0, 3, 4]), torch.ones(3), 3)
        >>> for queries, layout in layouts(edges):  # two private copies of 3-4, then 0-1-2 shared
        ...     print(queries.tolist(), layout.slot_node.tolist(), layout.slot_query is None)
        [1, 2] [3, 4, 3, 4] False
        [0] [0, 1, 2] True
    """

    def __init__(
        self,
        parts: PoolComponents,
        residuals: Residuals,
        *,
        dtype: torch.dtype,
        max_batch_slots: int,
        shared_component_nodes: int,
        max_columns: int,
    ) -> None:
        self.parts, self.residuals, self.dtype = parts, residuals, dtype
        self.max_batch_slots = max_batch_slots
        self.shared_component_nodes = shared_component_nodes
        self.max_columns = max_columns

    def __call__(self, edges: QueryEdges) -> Iterator[tuple[Tensor, Layout]]:
        """(queries [b], their layout) per batch: first the block batches, then the shared ones."""
        parts, device = self.parts, self.parts.size.device
        count = len(parts)
        pair_query, pair_component = self._query_components(edges)
        pair_size = parts.size[pair_component]
        copied = torch.zeros(edges.num_queries, dtype=torch.long, device=device)
        copied.index_add_(0, pair_query, pair_size + parts.edge_counts(pair_component))
        largest = torch.full((edges.num_queries,), -1, dtype=torch.long, device=device)
        largest.scatter_reduce_(0, pair_query, pair_size * count + pair_component, reduce="amax")
        linked = largest >= 0
        shared = linked & (largest // count > self.shared_component_nodes)
        yield from self._block_batches(edges, (linked & ~shared).nonzero()[:, 0], copied)
        yield from self._shared_batches(edges, shared.nonzero()[:, 0], largest, pair_query, pair_component)

    def _block_batches(self, edges: QueryEdges, queries: Tensor, copied: Tensor) -> Iterator[tuple]:
        """Consecutive runs of ``queries`` whose copies (``copied`` slots each) fit ``max_batch_slots``."""
        if not len(queries):
            return
        budget = torch.cumsum(copied[queries], 0) // max(self.max_batch_slots, 1)
        for group in torch.unique_consecutive(budget):
            batch = queries[budget == group]
            yield batch, self._block_layout(edges, batch)

    def _shared_batches(
        self, edges: QueryEdges, queries: Tensor, largest: Tensor, pair_query: Tensor, pair_component: Tensor
    ) -> Iterator[tuple]:
        """``queries`` grouped by their largest component, each group cut into batches of columns."""
        queries = queries[torch.argsort(largest[queries], stable=True)]
        _, group_sizes = torch.unique_consecutive(largest[queries], return_counts=True)
        for group in torch.split(queries, group_sizes.tolist()):
            in_group = torch.isin(pair_query, group)
            nodes = int(self.parts.size[torch.unique(pair_component[in_group])].sum())
            columns = max(1, min(self.max_columns, self.max_batch_slots // nodes))
            for batch in torch.split(group, columns):
                yield batch, self._shared_layout(edges, batch)

    def _query_components(self, edges: QueryEdges) -> tuple[Tensor, Tensor]:
        """Unique (query, component) pairs: the components each query touches, sorted by query."""
        count = len(self.parts)
        key = torch.unique(edges.query * count + self.parts.label[edges.node])
        return key // count, key % count

    def _select_edges(self, edges: QueryEdges, queries: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The edges of ``queries``, with the query renumbered to its position in ``queries``."""
        device = queries.device
        local = torch.full((edges.num_queries,), -1, dtype=torch.long, device=device)
        local[queries] = torch.arange(len(queries), device=device)
        keep = local[edges.query] >= 0
        return local[edges.query[keep]], edges.node[keep], edges.weight[keep].to(self.dtype)

    def _block_layout(self, edges: QueryEdges, queries: Tensor) -> Layout:
        """Each query gets a private copy of the components it touches, laid out block-diagonally."""
        parts, residuals = self.parts, self.residuals
        query, node, weight = self._select_edges(edges, queries)
        count = len(parts)
        key, inverse = torch.unique(query * count + parts.label[node], return_inverse=True)
        pair_query, pair_component = key // count, key % count
        pair_offset, slot_pair, slot_node, adjacency = parts.copy(pair_component)
        inside_error = scatter(residuals.error[pair_component], pair_query, dim=0, dim_size=len(queries))
        inside_dangling = scatter(residuals.dangling[pair_component, 0], pair_query, dim_size=len(queries))
        return Layout(
            adjacency=adjacency,
            slot_node=slot_node,
            slot_query=pair_query[slot_pair],
            num_columns=1,
            edge_row=pair_offset[inverse] + parts.position[node],
            edge_col=torch.zeros_like(node),
            edge_query=query,
            edge_weight=weight,
            outside_error=(residuals.total_error[None, :] - inside_error).clamp_min(0),
            outside_dangling=residuals.total_dangling - inside_dangling,
        )

    def _shared_layout(self, edges: QueryEdges, queries: Tensor) -> Layout:
        """One copy of all components the queries touch; each query is one column over it."""
        parts, residuals = self.parts, self.residuals
        query, node, weight = self._select_edges(edges, queries)
        components = torch.unique(parts.label[node])
        offset, slot_copy, slot_node, adjacency = parts.copy(components)
        copy_of_edge = torch.searchsorted(components, parts.label[node])
        inside_error = residuals.error[components].sum(0)
        inside_dangling = residuals.dangling[components, 0].sum()
        outside_error = (residuals.total_error - inside_error).clamp_min(0)
        return Layout(
            adjacency=adjacency,
            slot_node=slot_node,
            slot_query=None,
            num_columns=len(queries),
            edge_row=offset[copy_of_edge] + parts.position[node],
            edge_col=query,
            edge_query=query,
            edge_weight=weight,
            outside_error=outside_error[None, :].expand(len(queries), -1),
            outside_dangling=(residuals.total_dangling - inside_dangling).expand(len(queries)),
            slot_copy=slot_copy,
            edge_copy=copy_of_edge,
        )
