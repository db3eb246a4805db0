"""Batched personalized PageRank against networkx.pagerank on the query-augmented graph, query by query."""

from __future__ import annotations

import warnings

import networkx as nx
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import erdos_renyi_graph, to_undirected

from graphctx.retrieval.components import connected_components, label_propagation_components
from graphctx.retrieval.pagerank import PoolPageRank, QueryEdges

pytestmark = pytest.mark.usefixtures("one_torch_thread")


EXACT = {"dtype": torch.float64}  # alpha 0.85, tol 1e-6, max_iter 100: networkx's defaults
TOP_K = 3
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)] if torch.cuda.is_available() else ["cpu"]


def random_pool(seed: int, num_nodes: int = 70) -> Data:
    """Weighted graph with several components of different sizes and isolated (dangling) nodes."""
    generator = torch.Generator().manual_seed(seed)
    parts, offset = [], 0
    for size, probability in ((25, 0.15), (12, 0.3), (6, 0.5), (3, 1.0), (2, 1.0)):
        with torch.random.fork_rng():
            torch.manual_seed(seed * 100 + size)  # erdos_renyi_graph draws from the global generator
            edges = erdos_renyi_graph(size, probability)
        parts.append(edges + offset)
        offset += size
    edge_index = torch.cat(parts, dim=1)
    edge_index = edge_index[:, edge_index[0] < edge_index[1]]
    weight = 0.5 + 0.5 * torch.rand(edge_index.shape[1], generator=generator, dtype=torch.float64)
    edge_index, weight = to_undirected(edge_index, weight, num_nodes=num_nodes)
    return Data(edge_index=edge_index, edge_weight=weight, num_nodes=num_nodes)  # nodes 48.. isolated


def random_queries(seed: int, num_nodes: int, num_queries: int = 24) -> QueryEdges:
    """Queries with 0 to 5 edges to random pool nodes: some isolated, some touching several components."""
    generator = torch.Generator().manual_seed(seed)
    query, node = [], []
    for index in range(num_queries):
        degree = int(torch.randint(0, 6, (1,), generator=generator)) if index % 6 else 0
        picked = torch.randperm(num_nodes, generator=generator)[:degree]
        query += [index] * degree
        node += picked.tolist()
    weight = 0.8 + 0.2 * torch.rand(len(node), generator=generator, dtype=torch.float64)
    return QueryEdges(
        torch.tensor(query, dtype=torch.long), torch.tensor(node, dtype=torch.long), weight, num_queries
    )


def networkx_scores(pool: Data, edges: QueryEdges, query: int, max_iter: int = 100) -> dict:
    """The paper's way: copy the pool graph, add node "q" with its edges, networkx.pagerank from "q"."""
    graph = nx.Graph()
    graph.add_nodes_from(range(int(pool.num_nodes)))
    for (head, tail), weight in zip(pool.edge_index.T.tolist(), pool.edge_weight.tolist(), strict=True):
        graph.add_edge(head, tail, weight=weight)
    graph.add_node("q")
    mine = edges.query == query
    for node, weight in zip(edges.node[mine].tolist(), edges.weight[mine].tolist(), strict=True):
        graph.add_edge("q", node, weight=weight)
    scores = nx.pagerank(graph, alpha=0.85, personalization={"q": 1}, max_iter=max_iter, tol=1e-6)
    return {"scores": scores, "reachable": nx.node_connected_component(graph, "q") - {"q"}}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shared_component_nodes", [10**9, 0, 8], ids=["blocks", "shared", "mixed"])
@pytest.mark.parametrize("seed", [0, 1])
def test_scores_equal_networkx(seed: int, shared_component_nodes: int, device: str) -> None:
    pool = random_pool(seed)
    edges = random_queries(seed, pool.num_nodes)
    on_device = QueryEdges(
        edges.query.to(device), edges.node.to(device), edges.weight.to(device), edges.num_queries
    )
    ranker = PoolPageRank(pool.to(device), **EXACT, shared_component_nodes=shared_component_nodes)
    computed = ranker.all_scores(on_device)
    result = ranker.rank(on_device, TOP_K)
    computed.query, computed.node, computed.score = (
        computed.query.cpu(),
        computed.node.cpu(),
        computed.score.cpu(),
    )
    result.node_ids, result.scores, result.linked = (
        result.node_ids.cpu(),
        result.scores.cpu(),
        result.linked.cpu(),
    )
    for query in range(edges.num_queries):
        reference = networkx_scores(pool, edges, query)
        if not result.linked[query]:
            assert result.node_ids[query].tolist() == [-1] * TOP_K
            continue
        mine = computed.query == query
        nodes = computed.node[mine].tolist()
        # every pool node the query can reach is scored, and scores equal networkx's
        assert reference["reachable"] <= set(nodes)
        for node, score in zip(nodes, computed.score[mine].tolist(), strict=True):
            assert abs(score - reference["scores"][node]) < 1e-6
        assert abs(float(computed.query_score[query]) - reference["scores"]["q"]) < 1e-6
        # same top-k among reachable nodes (ties broken the same way are not required: none occur here)
        ranked = sorted(reference["reachable"], key=lambda node: -reference["scores"][node])[:TOP_K]
        got = [node for node in result.node_ids[query].tolist() if node >= 0]
        assert got == ranked
        expected_scores = [reference["scores"][node] for node in ranked]
        assert result.scores[query, : len(ranked)].tolist() == pytest.approx(expected_scores, abs=1e-6)


def test_unreached_nodes_hold_query_independent_leftover_mass() -> None:
    """Why ranking stays within the query's components: elsewhere networkx's scores do not depend on it."""
    pool = random_pool(3)
    edges = QueryEdges(
        torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([0.9, 0.95], dtype=torch.float64), 2
    )
    first, second = (networkx_scores(pool, edges, query) for query in (0, 1))
    assert first["reachable"] == second["reachable"]  # nodes 0 and 1 share the big component
    for node in set(range(pool.num_nodes)) - first["reachable"]:
        assert first["scores"][node] == pytest.approx(second["scores"][node], abs=1e-15)


def test_float32_close_to_float64() -> None:
    pool = random_pool(4)
    edges = random_queries(4, pool.num_nodes)
    exact = PoolPageRank(pool, **EXACT).rank(edges, TOP_K)
    fast = PoolPageRank(pool, dtype=torch.float32).rank(edges, TOP_K)
    assert fast.scores.dtype == torch.float32
    assert torch.allclose(fast.scores.double(), exact.scores, atol=1e-5)
    assert torch.equal(fast.iterations, exact.iterations)


@pytest.mark.parametrize(
    "variant",
    [
        {"max_batch_slots": 30},
        {"max_batch_slots": 1},
        {"shared_component_nodes": 0, "max_columns": 5},
        {"shared_component_nodes": 0, "max_batch_slots": 40},
    ],
    ids=["small-blocks", "one-query-per-batch", "shared-columns", "one-column-per-batch"],
)
def test_batching_does_not_change_results(variant: dict) -> None:
    pool = random_pool(5)
    edges = random_queries(5, pool.num_nodes, num_queries=16)
    whole = PoolPageRank(pool, **EXACT).rank(edges, TOP_K)
    split = PoolPageRank(pool, **EXACT, **variant).rank(edges, TOP_K)
    assert torch.equal(whole.node_ids, split.node_ids)
    assert torch.allclose(whole.scores, split.scores, atol=1e-12)
    assert torch.equal(whole.iterations, split.iterations)


def test_non_convergence_is_reported() -> None:
    pool = random_pool(6)
    edges = random_queries(6, pool.num_nodes)
    with pytest.raises(nx.PowerIterationFailedConvergence):
        networkx_scores(pool, edges, 1, max_iter=3)
    with pytest.warns(RuntimeWarning, match="did not converge within max_iter=3"):
        result = PoolPageRank(pool, **EXACT, max_iter=3).rank(edges, TOP_K)
    assert not result.converged[result.linked].any()
    assert (result.iterations[result.linked] == 3).all()


def test_converged_queries_report_networkx_iteration_count() -> None:
    pool = random_pool(7)
    edges = random_queries(7, pool.num_nodes)
    result = PoolPageRank(pool, **EXACT).rank(edges, TOP_K)
    assert result.converged.all()
    for query in result.linked.nonzero()[:, 0].tolist():
        stops = [max_iter for max_iter in range(1, 60) if _converges(pool, edges, query, max_iter)]
        assert stops[0] == int(result.iterations[query])


def _converges(pool: Data, edges: QueryEdges, query: int, max_iter: int) -> bool:
    try:
        networkx_scores(pool, edges, query, max_iter)
    except nx.PowerIterationFailedConvergence:
        return False
    return True


def test_pool_without_edges_and_isolated_targets() -> None:
    """A pool of isolated nodes: a query's neighbours become dangling-free only through the query."""
    pool = Data(
        edge_index=torch.zeros(2, 0, dtype=torch.long),
        edge_weight=torch.zeros(0, dtype=torch.float64),
        num_nodes=5,
    )
    edges = QueryEdges(
        torch.tensor([0, 0]), torch.tensor([1, 3]), torch.tensor([0.9, 0.85], dtype=torch.float64), 2
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = PoolPageRank(pool, **EXACT).rank(edges, TOP_K)
    reference = networkx_scores(pool, edges, 0)["scores"]
    assert result.node_ids[0, :2].tolist() == [1, 3]
    assert result.scores[0, :2].tolist() == pytest.approx([reference[1], reference[3]], abs=1e-6)
    assert result.node_ids[0, 2] == -1 and not result.linked[1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_label_propagation_components_equal_scipy(seed: int) -> None:
    """The CUDA components routine, run on the CPU, finds scipy's partition."""
    pool = random_pool(seed)
    shuffle = torch.randperm(pool.num_nodes, generator=torch.Generator().manual_seed(seed))
    edge_index = shuffle[pool.edge_index]  # node ids no longer follow the components
    ours = label_propagation_components(edge_index, pool.num_nodes)
    scipy_labels = connected_components(edge_index, pool.num_nodes)
    pairs = set(zip(ours.tolist(), scipy_labels.tolist(), strict=True))
    assert len(pairs) == len(set(ours.tolist())) == len(set(scipy_labels.tolist())) >= 70 - 48 + 5
