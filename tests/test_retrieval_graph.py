"""Question graph: chunked edges equal a brute-force build; query edges; stats; save and load."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import is_undirected

from graphctx.errors import ConfigError
from graphctx.retrieval.graph import (
    build_question_graph,
    degree_stats,
    density_warning,
    load_graph,
    query_edges,
    save_graph,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def clustered(count: int, seed: int, dim: int = 32) -> torch.Tensor:
    """Unit vectors around a few centres, so that some pairs are above 0.8 and most are not."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(6, dim, generator=generator)
    points = centres[torch.randint(0, 6, (count,), generator=generator)]
    points = (
        points / points.norm(dim=1, keepdim=True)
        + 0.6 * torch.randn(count, dim, generator=generator) / dim**0.5
    )
    return torch.nn.functional.normalize(points, dim=1)


def brute_force_pairs(
    left: torch.Tensor, right: torch.Tensor, threshold: float
) -> dict[tuple[int, int], float]:
    similarity = left.double() @ right.double().T
    rows, cols = (similarity > threshold).nonzero(as_tuple=True)
    return {(r, c): float(similarity[r, c]) for r, c in zip(rows.tolist(), cols.tolist(), strict=True)}


@pytest.mark.parametrize("chunk", [7, 64, 10_000])
def test_graph_edges_equal_brute_force(chunk: int) -> None:
    embeddings = clustered(150, seed=0)
    similarity = embeddings.double() @ embeddings.double().T
    assert ((similarity - 0.8).abs() > 1e-5).all()  # no pair so close to T that rounding could flip it
    graph = build_question_graph(embeddings, 0.8, chunk_size=chunk, dtype="float32")
    expected = {
        pair: w for pair, w in brute_force_pairs(embeddings, embeddings, 0.8).items() if pair[0] != pair[1]
    }
    assert 50 < len(expected) < 150 * 149 / 2
    got = {
        (r, c): w for (r, c), w in zip(graph.edge_index.T.tolist(), graph.edge_weight.tolist(), strict=True)
    }
    assert got.keys() == expected.keys()
    assert all(abs(got[pair] - expected[pair]) < 1e-5 for pair in got)
    assert isinstance(graph, Data) and graph.num_nodes == 150
    assert is_undirected(graph.edge_index, graph.edge_weight, num_nodes=150)


@pytest.mark.parametrize("chunk", [5, 1000])
def test_query_edges_equal_brute_force(chunk: int) -> None:
    both = clustered(150, seed=1)
    pool, queries = both[:120], both[120:]
    edges = query_edges(queries, pool, 0.8, chunk_size=chunk)
    expected = brute_force_pairs(queries, pool, 0.8)
    got = dict(
        zip(zip(edges.query.tolist(), edges.node.tolist(), strict=True), edges.weight.tolist(), strict=True)
    )
    assert got.keys() == expected.keys() and len(got) > 10
    assert edges.num_queries == 30


def test_degree_stats_on_a_known_graph() -> None:
    # path 0-1-2, pair 3-4, isolated 5
    edge_index = torch.tensor([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])
    graph = Data(edge_index=edge_index, edge_weight=torch.ones(6), num_nodes=6)
    stats = degree_stats(graph)
    assert stats["edges"] == 3 and stats["isolated"] == 1 and stats["max_degree"] == 2
    assert stats["components"] == 3 and stats["largest_component"] == 3
    assert stats["mean_degree"] == pytest.approx(1.0)
    assert stats["min_degree"] == 0 and stats["median_degree"] == 1
    assert stats["isolated_share"] == pytest.approx(1 / 6)
    assert stats["density"] == pytest.approx(3 / 15)


def test_density_warning_only_above_mean_degree_50() -> None:
    star = lambda leaves: Data(  # noqa: E731 -- hub 0 linked to every leaf: mean degree 2 * leaves / (leaves + 1)
        edge_index=torch.tensor(
            [[0] * leaves + list(range(1, leaves + 1)), list(range(1, leaves + 1)) + [0] * leaves]
        ),
        edge_weight=torch.ones(2 * leaves),
        num_nodes=leaves + 1,
    )
    assert density_warning(degree_stats(star(10)), threshold=0.8) is None
    complete = torch.combinations(torch.arange(60)).T
    dense = Data(
        edge_index=torch.cat([complete, complete.flip(0)], 1),
        edge_weight=torch.ones(2 * complete.shape[1]),
        num_nodes=60,
    )
    warning = density_warning(degree_stats(dense), threshold=0.8)
    assert "mean degree 59.0 > 50" in warning and "retrieval.max_neighbors" in warning


def top_m_union_brute_force(
    embeddings: torch.Tensor, threshold: float, m: int
) -> dict[tuple[int, int], float]:
    """Every pair above ``threshold``, kept when either end has the other among its m most similar
    (ties to the lower index): plain Python over the float64 similarity matrix."""
    pairs = {
        pair: w
        for pair, w in brute_force_pairs(embeddings, embeddings, threshold).items()
        if pair[0] != pair[1]
    }
    neighbours: dict[int, list[tuple[float, int]]] = {}
    for (i, j), w in pairs.items():
        neighbours.setdefault(i, []).append((-w, j))
    top = {i: {j for _, j in sorted(found)[:m]} for i, found in neighbours.items()}
    return {(i, j): w for (i, j), w in pairs.items() if j in top[i] or i in top.get(j, set())}


@pytest.mark.parametrize("m", [1, 2, 4])
def test_max_neighbors_keeps_the_union_of_each_nodes_top_m(m: int) -> None:
    embeddings = clustered(120, seed=4).double()
    full = build_question_graph(embeddings, 0.8, dtype="float64", chunk_size=17)
    capped = build_question_graph(embeddings, 0.8, max_neighbors=m, dtype="float64", chunk_size=17)
    assert is_undirected(capped.edge_index, capped.edge_weight)
    got = {
        (r, c): w for (r, c), w in zip(capped.edge_index.T.tolist(), capped.edge_weight.tolist(), strict=True)
    }
    expected = top_m_union_brute_force(embeddings, 0.8, m)
    assert got.keys() == expected.keys()
    assert all(got[pair] == pytest.approx(w, abs=1e-6) for pair, w in expected.items())
    # the cap bites (fewer edges), and no node loses its own m best links
    full_degree, capped_degree = degree_stats(full), degree_stats(capped)
    assert (
        capped_degree["edges"] < full_degree["edges"] and capped_degree["isolated"] == full_degree["isolated"]
    )
    degrees = torch.bincount(full.edge_index[0], minlength=120)
    assert (torch.bincount(capped.edge_index[0], minlength=120) >= degrees.clamp(max=m)).all()


def test_max_neighbors_caps_query_edges_at_the_m_most_similar() -> None:
    embeddings = clustered(100, seed=5).double()
    pool, queries = embeddings[:70], embeddings[70:]
    edges = query_edges(queries, pool, 0.8, max_neighbors=2, dtype="float64")
    everything = brute_force_pairs(queries, pool, 0.8)
    for query in range(30):
        mine = sorted((-w, node) for (q, node), w in everything.items() if q == query)
        assert sorted(edges.node[edges.query == query].tolist()) == sorted(node for _, node in mine[:2])


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_max_neighbors_must_be_a_positive_integer(bad) -> None:
    with pytest.raises(ConfigError, match=r"retrieval\.max_neighbors"):
        build_question_graph(clustered(10, seed=0), 0.8, max_neighbors=bad)


def test_save_and_load_round_trip(tmp_path) -> None:
    graph = build_question_graph(clustered(60, seed=3), 0.8)
    path = tmp_path / "graphs" / "pool.pt"
    save_graph(graph, path)
    loaded = load_graph(path)
    assert torch.equal(loaded.edge_index, graph.edge_index)
    assert torch.equal(loaded.edge_weight, graph.edge_weight)
    assert loaded.num_nodes == 60
    assert [p.name for p in path.parent.iterdir()] == ["pool.pt"]  # no temporary left behind


def test_load_errors_name_the_file(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"missing\.pt"):
        load_graph(tmp_path / "missing.pt")
    torch.save({"edge_index": torch.zeros(2, 0)}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match=r"bad\.pt.*edge_weight"):
        load_graph(tmp_path / "bad.pt")


def test_threshold_is_strict() -> None:
    embeddings = torch.tensor([[1.0, 0.0], [0.6, 0.8], [1.0, 0.0]], dtype=torch.float64)  # unit rows
    graph = build_question_graph(embeddings, 0.6, dtype="float64")
    pairs = set(map(tuple, graph.edge_index.T.tolist()))
    assert (0, 2) in pairs  # cos 1 > 0.6
    assert (0, 1) not in pairs  # cos 0.6 is not above 0.6


def test_bfloat16_products_give_the_full_precision_graph() -> None:
    """bfloat16 products only propose candidates: edges and weights equal the float64 brute force."""
    embeddings = clustered(150, seed=0)
    graph = build_question_graph(embeddings, 0.8, dtype="bfloat16", chunk_size=16)
    expected = {
        pair: w for pair, w in brute_force_pairs(embeddings, embeddings, 0.8).items() if pair[0] != pair[1]
    }
    got = {
        (r, c): w for (r, c), w in zip(graph.edge_index.T.tolist(), graph.edge_weight.tolist(), strict=True)
    }
    assert got.keys() == expected.keys() and len(got) > 50
    assert all(abs(got[pair] - expected[pair]) < 1e-6 for pair in got)
    rounded = embeddings.bfloat16().float()
    crude = {pair for pair in brute_force_pairs(rounded, rounded, 0.8) if pair[0] != pair[1]}
    assert crude != set(got)  # bfloat16 alone would have moved edges across the threshold


def test_pagerank_on_the_capped_graph_equals_networkx() -> None:
    """graphctx's capped graph + batched PageRank against networkx.pagerank on a graph capped by plain
    Python (each node's 3 most similar neighbours, union; each query's 3 most similar pool questions)."""
    import networkx as nx

    from graphctx.retrieval.pagerank import PoolPageRank

    embeddings = clustered(130, seed=6).double()
    pool, queries = embeddings[:100], embeddings[100:]
    graph = build_question_graph(pool, 0.8, max_neighbors=3, dtype="float64")
    edges = query_edges(queries, pool, 0.8, max_neighbors=3, dtype="float64")
    ranker = PoolPageRank(graph, dtype=torch.float64)
    computed, result = ranker.all_scores(edges), ranker.rank(edges, k=4)
    assert (
        degree_stats(graph)["max_degree"]
        < degree_stats(build_question_graph(pool, 0.8, dtype="float64"))["max_degree"]
    )

    reference = nx.Graph()
    reference.add_nodes_from(range(100))
    reference.add_weighted_edges_from(
        (i, j, w) for (i, j), w in top_m_union_brute_force(pool, 0.8, 3).items()
    )
    linked = 0
    for query in range(30):
        similar = sorted(
            (-w, node) for (q, node), w in brute_force_pairs(queries, pool, 0.8).items() if q == query
        )
        if not similar:
            assert not result.linked[query]
            continue
        linked += 1
        with_query = reference.copy()
        with_query.add_weighted_edges_from(("q", node, -negative) for negative, node in similar[:3])
        scores = nx.pagerank(with_query, alpha=0.85, personalization={"q": 1}, tol=1e-6)
        mine = computed.query == query
        for node, score in zip(computed.node[mine].tolist(), computed.score[mine].tolist(), strict=True):
            assert abs(score - scores[node]) < 1e-6
        reachable = nx.node_connected_component(with_query, "q") - {"q"}
        ranked = sorted(reachable, key=lambda node: -scores[node])[:4]
        assert [node for node in result.node_ids[query].tolist() if node >= 0] == ranked
    assert linked >= 10
