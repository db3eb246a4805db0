"""Connected components of the question graph, and the pool's nodes and edges grouped by component.

Personalized PageRank from a query never moves mass into a component the query does not touch
(:mod:`graphctx.retrieval.pagerank`), so the iteration runs over copies of just the touched components:
:class:`PoolComponents` keeps each component's nodes and edges as one contiguous range, so that copies of
any list of components are laid out with a few gathers (:meth:`PoolComponents.copy`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
import torch
from torch import Tensor
from torch_geometric.utils import cumsum, to_torch_csr_tensor


def csr_adjacency(edge_index: Tensor, weight: Tensor, size: tuple[int, int]) -> Tensor:
    """The sparse CSR matrix of coalesced, row-sorted edges, with torch's sparse invariant checks explicitly
    off: the indices are built here in range and sorted, so checking them would only cost time (and torch
    warns when the choice is left implicit).

    Examples:
        >>> matrix = csr_adjacency(torch.tensor([[0, 1], [1, 0]]), torch.tensor([2.0, 3.0]), (2, 2))
        >>> matrix.to_dense().tolist()
        [[0.0, 2.0], [3.0, 0.0]]
    """
    with torch.sparse.check_sparse_tensor_invariants(enable=False):
        return to_torch_csr_tensor(edge_index, weight, size=size, is_coalesced=True)


def label_propagation_components(edge_index: Tensor, num_nodes: int) -> Tensor:
    r"""Component labels by min-label propagation with pointer jumping (runs on the GPU, stays there).

    Each round sets :math:`\ell_v \leftarrow \min(\ell_v, \min_{(v, u) \in E} \ell_u)` and then
    :math:`\ell \leftarrow \ell[\ell]`; labels stay node ids of the same component and only decrease, so
    they settle on each component's smallest node id. Returned renumbered to ``0..K-1`` in order of that id.

    Examples:
        >>> label_propagation_components(torch.tensor([[0, 2, 3, 4], [2, 0, 4, 3]]), 5).tolist()
        [0, 1, 0, 2, 2]
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
    :func:`label_propagation_components` on CUDA (no round trip of the edges to the host).

    Examples:
        >>> connected_components(torch.tensor([[0, 2, 3, 4], [2, 0, 4, 3]]), 5).tolist()
        [0, 1, 0, 2, 2]
    """
    if edge_index.is_cuda:
        return label_propagation_components(edge_index, num_nodes)
    row, col = edge_index.cpu().numpy()
    matrix = scipy.sparse.coo_matrix((np.ones(len(row), dtype=np.int8), (row, col)), (num_nodes, num_nodes))
    _, labels = scipy.sparse.csgraph.connected_components(matrix, directed=False)
    return torch.from_numpy(labels).long().to(edge_index.device)


class PoolComponents:
    """The pool graph's nodes and edges grouped by connected component.

    ``edge_index`` must be coalesced (rows sorted) and hold both directions of every edge; ``weight`` is
    kept in its dtype. Component ``c`` holds nodes ``nodes[ptr[c]:ptr[c + 1]]`` (ascending ids) and edges
    ``edge_ptr[c]:edge_ptr[c + 1]`` of :attr:`edge_local` (endpoints as positions within the component).

    Examples:
        >>> edge_index = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
        >>> parts = PoolComponents(edge_index, torch.ones(4), num_nodes=5)
        >>> parts.label.tolist(), parts.size.tolist(), parts.position.tolist()
        ([0, 0, 1, 1, 2], [2, 2, 1], [0, 1, 0, 1, 0])
    """

    def __init__(self, edge_index: Tensor, weight: Tensor, num_nodes: int) -> None:
        device = edge_index.device
        self.label = connected_components(edge_index, num_nodes)
        count = int(self.label.max()) + 1 if num_nodes else 0
        self.size = torch.bincount(self.label, minlength=count)
        self.ptr = cumsum(self.size)
        self.nodes = torch.argsort(self.label, stable=True)
        self.position = torch.empty_like(self.nodes)
        self.position[self.nodes] = torch.arange(num_nodes, device=device) - self.ptr[self.label[self.nodes]]
        edge_component = self.label[edge_index[0]]
        edge_order = torch.argsort(edge_component, stable=True)
        self.edge_local = self.position[edge_index[:, edge_order]]
        self.edge_weight = weight[edge_order]
        self.edge_ptr = cumsum(torch.bincount(edge_component, minlength=count))

    def __len__(self) -> int:
        """The number of components."""
        return len(self.size)

    def edge_counts(self, components: Tensor) -> Tensor:
        """Directed edges within each of ``components``."""
        return self.edge_ptr[components + 1] - self.edge_ptr[components]

    def copy(self, components: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Lay copies of ``components`` (repeats allowed) one after another: (offset of each copy [P],
        copy of each slot [n], pool node of each slot [n], block-diagonal CSR adjacency [n, n])."""
        device = self.size.device
        arange = torch.arange(len(components), device=device)
        sizes = self.size[components]
        offset = cumsum(sizes)
        num_slots = int(offset[-1])
        slot_copy = torch.repeat_interleave(arange, sizes)
        slot_local = torch.arange(num_slots, device=device) - offset[slot_copy]
        slot_node = self.nodes[self.ptr[components[slot_copy]] + slot_local]

        edge_counts = self.edge_counts(components)
        edge_copy = torch.repeat_interleave(arange, edge_counts)
        edge_offset = cumsum(edge_counts)
        edge_id = (
            self.edge_ptr[components[edge_copy]]
            + torch.arange(int(edge_offset[-1]), device=device)
            - edge_offset[edge_copy]
        )
        # Rows ascend (copies in order, nodes in id order within a component): no sort needed.
        adjacency = csr_adjacency(
            self.edge_local[:, edge_id] + offset[edge_copy], self.edge_weight[edge_id], (num_slots, num_slots)
        )
        return offset, slot_copy, slot_node, adjacency
