"""Question graph: chunked edges equal a brute-force build; query edges; stats; save and load."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import is_undirected

from graphctx.retrieval.graph import (
    build_question_graph,
    degree_stats,
    load_graph,
    query_edges,
    save_graph,
)
from graphctx.retrieval.settings import RetrievalSettings

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
    settings = RetrievalSettings(threshold=0.8, similarity_chunk_size=chunk, similarity_dtype="float32")
    graph = build_question_graph(embeddings, settings)
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
    settings = RetrievalSettings(threshold=0.8, similarity_chunk_size=chunk)
    edges = query_edges(queries, pool, settings)
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


def test_save_and_load_round_trip(tmp_path) -> None:
    graph = build_question_graph(clustered(60, seed=3), RetrievalSettings())
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
    settings = replace(RetrievalSettings(), threshold=0.6, similarity_dtype="float64")
    graph = build_question_graph(embeddings, settings)
    pairs = set(map(tuple, graph.edge_index.T.tolist()))
    assert (0, 2) in pairs  # cos 1 > 0.6
    assert (0, 1) not in pairs  # cos 0.6 is not above 0.6


def test_bfloat16_products_give_the_full_precision_graph() -> None:
    """bfloat16 products only propose candidates: edges and weights equal the float64 brute force."""
    embeddings = clustered(150, seed=0)
    settings = RetrievalSettings(threshold=0.8, similarity_dtype="bfloat16", similarity_chunk_size=16)
    graph = build_question_graph(embeddings, settings)
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
