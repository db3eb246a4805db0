"""The incremental index (``graphctx index --add``): adding questions to a cached index gives the index,
and the retrieval results, of a rebuild on the grown pool."""

import io
import json
from argparse import Namespace

import pytest
import torch
from tiny_config import recent_pool_config

from graphctx.cli import subcommand_parser
from graphctx.command_line import parse
from graphctx.commands import index as index_command
from graphctx.errors import DataError
from graphctx.pipeline.config_file import load_config
from graphctx.retrieval.graph import build_question_graph
from graphctx.retrieval.index import build_index
from graphctx.retrieval.retriever import build_retriever
from graphctx.retrieval.scale.incremental import extend_graph, extend_index
from graphctx.retrieval.scale.knn import build_knn_graph
from graphctx.retrieval.scale.settings import ScaleSettings
from graphctx.retrieval.settings import RetrievalSettings


def clustered(count: int, seed: int) -> torch.Tensor:
    """Unit vectors around 15 fixed centres (dim 48); ``seed`` draws the points."""
    centres = torch.nn.functional.normalize(
        torch.randn(15, 48, generator=torch.Generator().manual_seed(0)), dim=1
    )
    generator = torch.Generator().manual_seed(seed)
    noise = 0.1 * torch.randn(count, 48, generator=generator)
    pick = torch.randint(0, 15, (count,), generator=generator)
    return torch.nn.functional.normalize(centres[pick] + noise, dim=1)


@pytest.mark.parametrize("cap", [None, 3])
def test_extended_exact_graph_is_the_rebuild_bit_for_bit(cap):
    old, new = clustered(500, seed=1), clustered(60, seed=2)
    settings = RetrievalSettings(device="cpu", threshold=0.75, max_neighbors=cap, similarity_chunk_size=37)
    start = build_question_graph(old, 0.75, max_neighbors=cap)
    grown = extend_graph(start, old, new, settings)
    rebuilt = build_question_graph(torch.cat([old, new]), 0.75, max_neighbors=cap)
    assert rebuilt.edge_index.shape[1] > 2 * start.edge_index.shape[1] // 2  # the new nodes add edges
    assert torch.equal(grown.edge_index, rebuilt.edge_index)
    assert torch.equal(grown.edge_weight, rebuilt.edge_weight)  # bitwise: both re-scored by exact_dot


def test_extended_knn_graph_keeps_every_new_edge_and_stays_a_subgraph():
    old, new = clustered(500, seed=1), clustered(60, seed=2)
    knn = ScaleSettings(graph_build="knn", knn_k=4)
    settings = RetrievalSettings(device="cpu", threshold=0.75, scale=knn)
    grown = extend_graph(build_knn_graph(old, 0.75, k=4), old, new, settings)
    exact = build_question_graph(torch.cat([old, new]), 0.75)
    stride = 560
    keys = grown.edge_index[0] * stride + grown.edge_index[1]
    exact_keys = exact.edge_index[0] * stride + exact.edge_index[1]
    assert torch.isin(keys, exact_keys).all()
    touches_new = (exact.edge_index >= 500).any(0)
    assert torch.isin(exact_keys[touches_new], keys).all()
    assert not torch.isin(exact_keys, keys).all()  # k=4 leaves old edges out: still approximate


TEXTS = [
    "How do I stake ADA with Daedalus?",
    "How to delegate ADA to a stake pool",
    "What is a UTXO in Cardano?",
    "Explain the extended UTXO model",
    "How long does an epoch last?",
    "Why is my transaction still pending?",
]
ADDED = ["Which wallet can delegate my ADA?", "How many slots are in one epoch?"]


def test_add_then_query_equals_rebuild_then_query(tmp_path):
    """A rebuild in a fresh cache re-embeds the grown pool: the encoder's last bits follow its batches
    (padding), so embeddings are equal to rounding there and the graph is compared on those; in the same
    cache the rebuild reads the added-to entry itself."""
    settings = RetrievalSettings(device="cpu", threshold=0.4, top_k=3)
    ids, added_ids = list(range(1, 7)), [7, 8]
    build_index(ids, TEXTS, settings, tmp_path / "a")
    grown = extend_index(ids, TEXTS, added_ids, ADDED, settings, tmp_path / "a")
    rebuilt = build_index(ids + added_ids, TEXTS + ADDED, settings, tmp_path / "b")
    assert torch.equal(grown.ids, rebuilt.ids)
    assert torch.allclose(grown.embeddings, rebuilt.embeddings, atol=1e-6)
    assert torch.equal(grown.graph.edge_index, rebuilt.graph.edge_index)
    assert torch.allclose(grown.graph.edge_weight, rebuilt.graph.edge_weight, atol=1e-6)
    assert (grown.graph.edge_index >= 6).any()  # the added questions are linked
    on_same = build_question_graph(grown.embeddings, 0.4)
    assert torch.equal(on_same.edge_index, grown.graph.edge_index)
    assert torch.equal(on_same.edge_weight, grown.graph.edge_weight)
    queries = ["delegating ADA from a wallet", "epoch length in slots"]
    hits = [
        [[hit.id for hit in row] for row in build_retriever(index, settings).retrieve(queries)]
        for index in (grown, rebuilt)
    ]
    assert hits[0] == hits[1] and any(hit in added_ids for row in hits[0] for hit in row)
    again = build_index(ids + added_ids, TEXTS + ADDED, settings, tmp_path / "a")  # the entry a rebuild reads
    assert torch.equal(again.embeddings, grown.embeddings)
    assert torch.equal(again.graph.edge_weight, grown.graph.edge_weight)


def test_bad_additions_are_one_line_errors(tmp_path):
    settings = RetrievalSettings(device="cpu", threshold=0.4)
    with pytest.raises(DataError, match="no cached index of the pool"):
        extend_index([1, 2], TEXTS[:2], [3], ADDED[:1], settings, tmp_path)
    with pytest.raises(DataError, match="question id 2 is already in the pool"):
        extend_index([1, 2], TEXTS[:2], [2], ADDED[:1], settings, tmp_path)
    with pytest.raises(DataError, match="question 5 has the text of a pool question"):
        extend_index([1, 2], TEXTS[:2], [5], TEXTS[1:2], settings, tmp_path)
    table = tmp_path / "new.jsonl"
    table.write_text(json.dumps({"id": 9, "title": "no question column"}) + "\n")
    with pytest.raises(DataError, match=r"new\.jsonl: missing column\(s\) question"):
        index_command.added_questions(str(table))


@pytest.mark.slow
def test_index_command_adds_questions_to_the_cached_pool(tmp_path, capsys, smollm2_folder):
    cache, config = str(tmp_path / "cache"), str(recent_pool_config(tmp_path, smollm2_folder))
    out = io.StringIO()
    assert index_command.execute(index_args("--config", config, "--cache_dir", cache, "--json"), out) == 0
    before = json.loads(out.getvalue())
    table = tmp_path / "new.jsonl"
    rows = [{"id": 10**9 + n, "question": text} for n, text in enumerate(ADDED)]
    table.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = io.StringIO()
    added = index_args("--config", config, "--cache_dir", cache, "--add", str(table), "--json")
    assert index_command.execute(added, out) == 0
    after = json.loads(out.getvalue())
    assert after["pool"] == before["pool"] + 2 and after["added"] == 2
    assert after["edges"] >= before["edges"]
    assert "exact build" in capsys.readouterr().err

    test = load_config(config, ["--cache_dir", cache]).load_dataset()["test"][0]  # an evaluated question
    for row in (
        {"id": test["id"], "question": "another text"},
        {"id": 10**9 + 7, "question": test["question"]},
    ):
        table.write_text(json.dumps(row) + "\n")
        with pytest.raises(DataError) as error:
            index_command.execute(added, io.StringIO())
        assert str(error.value).startswith(
            f"--add {table}: row 1 (id {row['id']}) is a question of the test split"
        )


def index_args(*argv: str) -> Namespace:
    """``graphctx index``'s arguments as its own parser reads them."""
    return parse(subcommand_parser("index"), [str(arg) for arg in argv])
