"""The scale modes of retrieval: the k-NN graph build (Faiss) and forward-push PageRank, against the exact
build and networkx-exact power iteration on small graphs; their settings, the `retrieval.scale` section."""

import re

import pytest
import torch
import yaml
from tiny_config import TINY
from torch_geometric.data import Data
from torch_geometric.utils import scatter, to_undirected

from graphctx.errors import ConfigError
from graphctx.pipeline.config_file import load_config
from graphctx.retrieval.graph import build_question_graph
from graphctx.retrieval.index import index_key
from graphctx.retrieval.numerics import pinned_threads
from graphctx.retrieval.pagerank import PoolPageRank, QueryEdges
from graphctx.retrieval.scale.knn import build_knn_graph, edge_recall
from graphctx.retrieval.scale.push import PoolPush
from graphctx.retrieval.scale.push_frontier import FrontierPush
from graphctx.retrieval.scale.settings import ScaleSettings
from graphctx.retrieval.settings import RetrievalSettings


def clustered(count: int, seed: int = 0) -> torch.Tensor:
    """Unit vectors around 20 random centres (dim 64)."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.nn.functional.normalize(torch.randn(20, 64, generator=generator), dim=1)
    noise = 0.08 * torch.randn(count, 64, generator=generator)
    return torch.nn.functional.normalize(centres[torch.arange(count) % 20] + noise, dim=1)


def weighted_graph(seed: int = 0) -> tuple[Data, QueryEdges]:
    """A random weighted graph of 300 nodes (some isolated) and four queries, one without edges."""
    generator = torch.Generator().manual_seed(seed)
    pairs = torch.randint(0, 280, (2, 700), generator=generator)
    pairs = pairs[:, pairs[0] != pairs[1]]
    weight = torch.rand(pairs.shape[1], generator=generator, dtype=torch.float64) + 0.1
    edge_index, edge_weight = to_undirected(pairs, weight, reduce="max")
    graph = Data(edge_index=edge_index, edge_weight=edge_weight, num_nodes=300)
    weights = torch.tensor([0.9, 0.8, 0.85, 0.95, 0.9, 0.82], dtype=torch.float64)
    edges = QueryEdges(torch.tensor([0, 0, 0, 1, 1, 2]), torch.tensor([5, 7, 9, 3, 100, 290]), weights, 4)
    return graph, edges


@pytest.mark.parametrize("push", [PoolPush, FrontierPush])
def test_push_with_tiny_eps_ranks_as_power_iteration(push):
    graph, edges = weighted_graph()
    power = PoolPageRank(graph, dtype=torch.float64, tol=1e-13, max_iter=2000).rank(edges, k=10)
    result = push(graph, eps=1e-11, dtype=torch.float64).rank(edges, k=10)
    assert torch.equal(result.node_ids, power.node_ids)
    assert torch.allclose(result.scores, power.scores, atol=1e-8)
    assert result.linked.tolist() == [True, True, True, False]
    assert result.converged.all() and result.iterations[3] == 0


@pytest.mark.parametrize("push", [PoolPush, FrontierPush])
@pytest.mark.parametrize("eps", [1e-3, 1e-5])
def test_push_error_within_its_bound(push, eps):
    graph, edges = weighted_graph(seed=1)
    exact = PoolPageRank(graph, dtype=torch.float64, tol=1e-12, max_iter=1000).all_scores(edges)
    result = push(graph, eps=eps, dtype=torch.float64).rank(edges, k=graph.num_nodes)
    rows = zip(result.node_ids.tolist(), result.scores.tolist(), strict=True)
    estimate = {
        (query, node): score
        for query, (nodes, scores) in enumerate(rows)
        for node, score in zip(nodes, scores, strict=True)
        if node >= 0
    }
    degree = scatter(graph.edge_weight, graph.edge_index[0], dim_size=graph.num_nodes, reduce="sum")
    extra = {
        (q, v): w
        for q, v, w in zip(edges.query.tolist(), edges.node.tolist(), edges.weight.tolist(), strict=True)
    }
    gaps, bounds = [], []
    for query, node, score in zip(
        exact.query.tolist(), exact.node.tolist(), exact.score.tolist(), strict=True
    ):
        node_degree = float(degree[node]) + extra.get((query, node), 0.0)
        if node_degree == 0:
            continue
        gaps.append(score - estimate.get((query, node), 0.0))
        bounds.append(eps * node_degree)
    gaps, bounds = torch.tensor(gaps), torch.tensor(bounds)
    assert (gaps >= -1e-10).all() and (gaps <= bounds + 1e-10).all()
    assert gaps.max() > 0.01 * bounds.max()  # the bound is not vacuous for this eps


def test_push_batches_equal_one_query_at_a_time():
    graph, edges = weighted_graph(seed=2)
    ranker = PoolPush(graph, eps=1e-4, dtype=torch.float64)
    with pinned_threads(2, "cpu"):
        batch = ranker.rank(edges, k=8)
    for query in range(edges.num_queries):
        pick = edges.query == query
        one = QueryEdges(edges.query[pick] * 0, edges.node[pick], edges.weight[pick], 1)
        alone = ranker.rank(one, k=8)
        assert torch.equal(alone.node_ids[0], batch.node_ids[query])
        assert torch.equal(alone.scores[0], batch.scores[query])


def test_knn_graph_with_enough_neighbours_is_the_exact_graph():
    unit = clustered(400)
    exact = build_question_graph(unit, 0.7)
    knn = build_knn_graph(unit, 0.7, k=40)
    assert exact.edge_index.shape[1] > 4000  # ~19 neighbours above T per node: k=40 covers them
    assert torch.equal(knn.edge_index, exact.edge_index)
    assert torch.allclose(knn.edge_weight, exact.edge_weight, atol=1e-6)  # vecdot vs matmul rounding
    assert edge_recall(knn, unit, 0.7, sample=100) == 1.0
    capped = build_knn_graph(unit, 0.7, k=40, max_neighbors=5)
    assert torch.equal(capped.edge_index, build_question_graph(unit, 0.7, max_neighbors=5).edge_index)


def test_knn_graph_with_few_neighbours_is_a_subgraph_with_recall_below_one():
    unit = clustered(400)
    exact = build_question_graph(unit, 0.7)
    knn = build_knn_graph(unit, 0.7, k=5)
    stride = unit.shape[0]
    exact_keys = exact.edge_index[0] * stride + exact.edge_index[1]
    assert torch.isin(knn.edge_index[0] * stride + knn.edge_index[1], exact_keys).all()
    recall = edge_recall(knn, unit, 0.7, sample=100)
    assert 0.2 < recall < 0.7  # about 5-10 of 19 neighbours kept per node


def test_a_knn_index_never_reuses_an_exact_entry():
    ids, texts = [1, 2], ["a", "b"]
    exact = RetrievalSettings(device="cpu")
    knn = RetrievalSettings(device="cpu", scale=ScaleSettings(graph_build="knn"))
    assert index_key(ids, texts, exact) != index_key(ids, texts, knn)
    assert index_key(ids, texts, knn) != index_key(
        ids, texts, RetrievalSettings(device="cpu", scale=ScaleSettings(graph_build="knn", knn_k=8))
    )
    push = RetrievalSettings(device="cpu", scale=ScaleSettings(ppr="push"))
    assert index_key(ids, texts, exact) == index_key(ids, texts, push)


def test_retriever_runs_the_scale_modes_end_to_end(tmp_path):
    from graphctx.retrieval.index import build_index
    from graphctx.retrieval.retriever import build_retriever

    texts = ["How do I stake ADA?", "How to stake ADA", "What is a UTXO?", "Explain a UTXO"]
    hits = {}
    for build, ppr in (("exact", "power"), ("knn", "push")):
        scale = ScaleSettings(graph_build=build, ppr=ppr)
        settings = RetrievalSettings(device="cpu", threshold=0.6, top_k=2, scale=scale)
        index = build_index([1, 2, 3, 4], texts, settings, tmp_path)
        assert index.stats["graph_build"] == build and index.stats.get("edge_recall", 1.0) == 1.0
        hits[build] = [
            [hit.id for hit in row] for row in build_retriever(index, settings).retrieve(["staking ADA"])
        ]
    assert hits["knn"] == hits["exact"]


OLD_KEYS = ("graph_build", "knn_k", "knn_nprobe", "knn_recall_sample", "ppr", "ppr_eps")


@pytest.mark.parametrize("name", OLD_KEYS)
def test_an_old_flat_scale_key_is_refused_in_one_line_naming_its_new_key(name, tmp_path):
    default = getattr(ScaleSettings(), name)
    document = yaml.safe_load(TINY.read_text())
    document["retrieval"][name] = default
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(document))
    moved = f"retrieval.{name}: moved to retrieval.scale.{name}"
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: {re.escape(moved)}$"):
        load_config(path, devices=False)
    with pytest.raises(ConfigError, match=re.escape(moved)):
        load_config(TINY, [f"--retrieval.{name}", str(default)], devices=False)


def test_the_scale_section_is_read_checked_and_off_by_default():
    assert load_config(TINY, devices=False).retrieval.scale == ScaleSettings()
    on = ["--retrieval.scale.graph_build", "knn", "--retrieval.scale.knn_k", "8"]
    on += ["--retrieval.scale.ppr", "push"]
    assert load_config(TINY, on, devices=False).retrieval.scale == ScaleSettings("knn", 8, ppr="push")
    with pytest.raises(ConfigError, match=r"retrieval\.scale\.knn_k: must be >= 1, got 0"):
        load_config(TINY, ["--retrieval.scale.knn_k", "0"], devices=False)


def test_fingerprints_hold_the_scale_settings_flat_by_their_old_names():
    flat = RetrievalSettings(scale=ScaleSettings(ppr="push", ppr_eps=1e-4)).flat()
    assert "scale" not in flat and list(flat)[-2:] == ["use_faiss", "extra"]
    assert (flat["graph_build"], flat["ppr"], flat["ppr_eps"]) == ("exact", "push", 1e-4)
