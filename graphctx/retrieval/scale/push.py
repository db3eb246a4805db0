r"""Approximate personalized PageRank by forward push (Andersen, Chung & Lang 2006; as PPRGo and
``torch_geometric.utils.get_ppr``), batched over queries, on the CPU (numba loops,
:mod:`~graphctx.retrieval.scale.push_kernel`);
:class:`~graphctx.retrieval.scale.push_frontier.FrontierPush` is the torch version for the GPU.

The graph is the one :mod:`~graphctx.retrieval.pagerank` iterates on: the pool graph plus the query node
:math:`q` (index ``N``) linked to its pool neighbours by :class:`QueryEdges`, weighted degrees
:math:`d_v` counting the query's edge. The exact vector :math:`\pi` is the fixed point networkx's power
iteration converges to, :math:`\pi = (1-\alpha) e_q + \alpha \pi P` on :math:`q`'s components (no node of
those is dangling, so networkx's dangling rule never fires; untouched components get no mass).

Push keeps an estimate :math:`p` and a residual :math:`r` (start :math:`p = 0`, :math:`r = e_q`) and, while
some node has :math:`r_u > \varepsilon d_u` (the tolerance relative to the weighted degree, as PPRGo),
pushes it: :math:`p_u \mathrel{+}= (1-\alpha) r_u`, each neighbour gets :math:`\alpha r_u w_{uv} / d_u`,
:math:`r_u = 0`. The invariant :math:`\pi = p + \sum_u r_u \pi_u` and the symmetry
:math:`d_u \pi_u(v) = d_v \pi_v(u)` of undirected graphs give, at the end, the guaranteed per-node bound

.. math:: 0 \le \pi_v - p_v \le \varepsilon\, d_v \quad\text{for every node } v

(one-sided: push never overestimates; summed, :math:`\lVert \pi - p \rVert_1 \le \varepsilon \sum_v d_v`
over the nodes reached). Each push adds at least :math:`(1-\alpha)\varepsilon d_u` to :math:`\sum p \le 1`
and costs :math:`\deg(u)` edge visits, so a query visits at most :math:`1/((1-\alpha)\varepsilon\, \bar w)`
edges (:math:`\bar w` the least edge weight, above the threshold T): a bound free of the pool size.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, scatter

from graphctx.retrieval.layout import QueryEdges
from graphctx.retrieval.pagerank import PageRankResult
from graphctx.retrieval.scale.push_kernel import push_strided


class PoolPush:
    r"""Forward-push personalized PageRank on the pool graph (CPU) for any number of queries (see the
    module): damping ``alpha``, residual tolerance ``eps`` (push while :math:`r_u > \varepsilon d_u`),
    computed in float64, scores returned in ``dtype``; top-``k`` by the ranking rule with
    ``tie_tolerance``. Queries run on ``torch.get_num_threads()`` threads, each owning a workspace of
    about 41 bytes per pool node, allocated on first use.

    Examples:
        >>> path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), edge_weight=torch.ones(4),
        ...             num_nodes=4)
        >>> query = QueryEdges(torch.tensor([0]), torch.tensor([2]), torch.tensor([1.0]), num_queries=1)
        >>> PoolPush(path, eps=1e-9, dtype=torch.float64).rank(query, k=3).node_ids.tolist()
        [[2, 1, 0]]
    """

    def __init__(
        self,
        graph: Data,
        *,
        alpha: float = 0.85,
        eps: float = 1e-4,
        dtype: torch.dtype = torch.float32,
        tie_tolerance: float = 1e-6,
    ) -> None:
        self.alpha, self.eps, self.dtype, self.tie_tolerance = alpha, eps, dtype, tie_tolerance
        self.num_nodes = n = int(graph.num_nodes)
        edge_index, weight = coalesce(graph.edge_index.cpu(), graph.edge_weight.cpu().double(), n)
        self.col, self.weight = edge_index[1].numpy(), weight.numpy()
        self.rowptr = np.zeros(n + 1, dtype=np.int64)
        self.rowptr[1:] = np.cumsum(np.bincount(edge_index[0].numpy(), minlength=n))
        self.degree = scatter(weight, edge_index[0], dim_size=n, reduce="sum").numpy()
        self.work = np.zeros((0, 3, n + 1))
        self.index = np.zeros((0, 2, n + 1), dtype=np.int64)
        self.flags = np.zeros((0, n + 1), dtype=np.uint8)

    def rank(self, edges: QueryEdges, k: int) -> PageRankResult:
        """Top-``k`` pool nodes per query by the pushed estimate (-1 / 0 padded past the touched nodes);
        ``iterations`` counts pushes; push always terminates, so ``converged`` is true."""
        batch = edges.num_queries
        order = torch.argsort(edges.query.cpu(), stable=True)
        q_node = edges.node.cpu()[order].numpy().astype(np.int64)
        q_weight = edges.weight.cpu()[order].double().numpy()
        counts = np.bincount(edges.query.cpu().numpy(), minlength=batch)
        q_ptr = np.zeros(batch + 1, dtype=np.int64)
        q_ptr[1:] = np.cumsum(counts)
        threads = self._workspaces(max(1, min(batch, torch.get_num_threads())))
        ids = np.full((batch, k), -1, dtype=np.int64)
        scores, pushes = np.zeros((batch, k)), np.zeros(batch, dtype=np.int64)
        arrays = (self.rowptr, self.col, self.weight, self.degree, q_ptr, q_node, q_weight)
        settings = (self.alpha, self.eps, k, self.tie_tolerance)

        def stride(first: int) -> None:
            push_strided(
                *arrays, *settings, first, threads, self.work[first], self.index[first],
                self.flags[first], ids, scores, pushes,
            )  # fmt: skip

        if threads == 1:
            stride(0)
        else:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(stride, range(threads)))
        linked = torch.from_numpy(counts > 0)
        return PageRankResult(
            torch.from_numpy(ids),
            torch.from_numpy(scores).to(self.dtype),
            torch.from_numpy(pushes),
            torch.ones(batch, dtype=torch.bool),
            linked,
        )

    def _workspaces(self, threads: int) -> int:
        """Make sure ``threads`` workspaces exist; return ``threads``."""
        have = len(self.work)
        if have < threads:
            size = self.num_nodes + 1
            self.work = np.concatenate([self.work, np.zeros((threads - have, 3, size))])
            self.index = np.concatenate([self.index, np.zeros((threads - have, 2, size), dtype=np.int64)])
            self.flags = np.concatenate([self.flags, np.zeros((threads - have, size), dtype=np.uint8)])
        return threads
