"""Edits and deletions of a cached index (graphctx.retrieval.scale.updates): after any sequence of updates the
graph is the rebuild's on the resulting pool (exact build, capped or not), a deletion recomputes pairs only
under a cap, and a k-NN build stays a subgraph of the exact graph, exact around every fresh node."""

import pytest
import torch
from test_retrieval_incremental import ADDED, TEXTS, clustered
from tiny_config import recent_pool_config

from graphctx.errors import DataError
from graphctx.pipeline.config_file import load_config
from graphctx.retrieval.graph import build_question_graph, similarity_edges
from graphctx.retrieval.index import build_index
from graphctx.retrieval.retriever import build_retriever
from graphctx.retrieval.scale.knn import build_knn_graph
from graphctx.retrieval.scale.settings import ScaleSettings
from graphctx.retrieval.scale.updates import PoolUpdate, update_graph
from graphctx.retrieval.settings import RetrievalSettings
from graphctx.serve.live_pool import LivePool


def apply(graph, embeddings, update_kept, fresh_rows, settings):
    """One update on embedding rows: ``update_kept`` old → new (-1 gone), ``fresh_rows`` the new rows of
    the fresh nodes (appended or replacing their slot)."""
    kept = torch.tensor(update_kept)
    total = int(kept.max()) + 1 + sum(1 for slot in fresh_rows if slot >= int(kept.max()) + 1)
    new = torch.empty(total, embeddings.shape[1])
    new[kept[kept >= 0]] = embeddings[kept >= 0]
    for slot, row in fresh_rows.items():
        new[slot] = row
    fresh = torch.tensor(sorted(fresh_rows), dtype=torch.long)
    return update_graph(graph, kept, new, fresh, settings), new


def sequence(embeddings, graph, settings):
    """Delete node 3 and 40, edit node 7 to a point near node 100, add two points: the graph and the
    embeddings after each step."""
    count = len(embeddings)
    extra = clustered(3, seed=9)
    kept = [i - (i > 3) - (i > 40) if i not in (3, 40) else -1 for i in range(count)]
    graph, embeddings = apply(graph, embeddings, kept, {}, settings)
    count = len(embeddings)
    kept = [-1 if i == 7 else i for i in range(count)]
    edited = torch.nn.functional.normalize(embeddings[100] * 0.99 + extra[0] * 0.01, dim=0)
    graph, embeddings = apply(graph, embeddings, kept, {7: edited}, settings)
    appended = {count: extra[1], count + 1: extra[2]}
    graph, embeddings = apply(graph, embeddings, list(range(count)), appended, settings)
    return graph, embeddings


@pytest.mark.parametrize("cap", [None, 2])
def test_updated_exact_graph_is_the_rebuild_bit_for_bit(cap):
    settings = RetrievalSettings(device="cpu", threshold=0.75, max_neighbors=cap, similarity_chunk_size=37)
    start = clustered(300, seed=1)
    graph, embeddings = sequence(start, build_question_graph(start, 0.75, max_neighbors=cap), settings)
    rebuilt = build_question_graph(embeddings, 0.75, max_neighbors=cap)
    assert len(embeddings) == 300 - 2 + 2
    assert torch.equal(graph.edge_index, rebuilt.edge_index)
    assert torch.equal(graph.edge_weight, rebuilt.edge_weight)


def test_updated_knn_graph_is_a_subgraph_exact_around_the_updates():
    knn = ScaleSettings(graph_build="knn", knn_k=4)
    settings = RetrievalSettings(device="cpu", threshold=0.75, scale=knn)
    start = clustered(300, seed=1)
    graph, embeddings = sequence(start, build_knn_graph(start, 0.75, k=4), settings)
    exact = build_question_graph(embeddings, 0.75)
    keys = graph.edge_index[0] * 1000 + graph.edge_index[1]
    exact_keys = exact.edge_index[0] * 1000 + exact.edge_index[1]
    assert torch.isin(keys, exact_keys).all()
    fresh = torch.tensor([7, 298, 299])
    around = torch.isin(exact.edge_index, fresh).any(0)
    assert around.any() and torch.isin(exact_keys[around], keys).all()


@pytest.mark.parametrize(("cap", "recomputed"), [(None, 0), (2, "neighbours")])
def test_a_deletion_recomputes_pairs_only_under_a_cap(cap, recomputed, monkeypatch):
    """Without a cap the pairs among the survivors are the old ones, so deleting recomputes none (the cost
    of a delete is then that of filtering the edges, below an add's one similarity row); under a cap the
    deleted node's neighbours are re-ranked, their top-m may now take a pair the cap dropped."""
    import graphctx.retrieval.scale.updates as updates

    rows = []

    def recorded(left, right, threshold, **options):
        rows.append(len(left))
        return similarity_edges(left, right, threshold, **options)

    monkeypatch.setattr(updates, "similarity_edges", recorded)
    settings = RetrievalSettings(device="cpu", threshold=0.75, max_neighbors=cap)
    start = clustered(300, seed=1)
    graph = build_question_graph(start, 0.75, max_neighbors=cap)
    neighbours = int((graph.edge_index[0] == 3).sum())
    kept = [i - (i > 3) if i != 3 else -1 for i in range(300)]
    updated, embeddings = apply(graph, start, kept, {}, settings)
    assert neighbours > 0 and rows == [neighbours if recomputed == "neighbours" else 0]
    rebuilt = build_question_graph(embeddings, 0.75, max_neighbors=cap)
    assert torch.equal(updated.edge_index, rebuilt.edge_index)
    assert torch.equal(updated.edge_weight, rebuilt.edge_weight)


def test_update_index_then_query_equals_rebuild_then_query(tmp_path):
    """Add, edit and delete on the cached index of six questions: the index a rebuild of the resulting
    pool gives (embeddings to the encoder's batch rounding, the graph on them bit for bit), same hits."""
    from graphctx.retrieval.scale.updates import update_index

    settings = RetrievalSettings(device="cpu", threshold=0.4, top_k=3, max_neighbors=2)
    ids = list(range(1, 7))
    index = build_index(ids, TEXTS, settings, tmp_path / "a")
    index, texts = update_index(index, TEXTS, PoolUpdate(added=((7, ADDED[0]),)), settings, tmp_path / "a")
    edit = PoolUpdate(edited=((2, ADDED[1]),), deleted=(5,))
    index, texts = update_index(index, texts, edit, settings, tmp_path / "a")
    assert index.ids.tolist() == [1, 2, 3, 4, 6, 7] and texts[1] == ADDED[1]
    rebuilt = build_index(index.ids.tolist(), texts, settings, tmp_path / "b")
    assert torch.allclose(index.embeddings, rebuilt.embeddings, atol=1e-6)
    assert torch.equal(index.graph.edge_index, rebuilt.graph.edge_index)
    on_same = build_question_graph(index.embeddings, 0.4, max_neighbors=2)
    assert torch.equal(on_same.edge_weight, index.graph.edge_weight)
    queries = ["delegating ADA from a wallet", "epoch length in slots"]
    hits = [
        [[hit.id for hit in row] for row in build_retriever(built, settings).retrieve(queries)]
        for built in (index, rebuilt)
    ]
    assert hits[0] == hits[1]
    again = build_index(index.ids.tolist(), texts, settings, tmp_path / "a")  # the entry a rebuild reads
    assert torch.equal(again.embeddings, index.embeddings)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (PoolUpdate(), "no question to add, edit or delete"),
        (PoolUpdate(deleted=(9,)), "question id 9 is not in the pool"),
        (PoolUpdate(edited=((9, "x"),)), "question id 9 is not in the pool"),
        (PoolUpdate(added=((2, "x"),)), "question id 2 is already in the pool"),
        (PoolUpdate(deleted=(2,), edited=((2, "x"),)), "question id 2 is named twice"),
        (PoolUpdate(added=((8, " "),)), "question 8 has an empty text"),
    ],
)
def test_bad_updates_are_one_line_errors(update, message):
    with pytest.raises(DataError, match=message):
        update.check([1, 2, 3])


@pytest.mark.slow
def test_index_command_edits_and_deletes_in_the_cached_index_and_a_live_pool(tmp_path, smollm2_folder):
    """``graphctx index --edit/--delete`` on the config's cached pool index, and ``--pool-dir`` on a live
    pool (the same operations as graphctx serve's endpoints, in batches)."""
    import io
    import json

    from test_retrieval_incremental import index_args

    from graphctx.commands import index as index_command

    cache, config = str(tmp_path / "cache"), str(recent_pool_config(tmp_path, smollm2_folder))
    out = io.StringIO()
    assert index_command.execute(index_args("--config", config, "--cache_dir", cache, "--json"), out) == 0
    before = json.loads(out.getvalue())
    pool = LivePool(tmp_path / "live", load_config(config).retrieval, cache).start(
        load_config(config, ["--cache_dir", cache]).load_dataset()["train"]
    )
    first, second = pool.rows[0]["id"], pool.rows[1]["id"]
    deleted, edited = tmp_path / "deleted.jsonl", tmp_path / "edited.jsonl"
    deleted.write_text(json.dumps({"id": first}) + "\n")
    edited.write_text(json.dumps({"id": second, "question": ADDED[0], "answer": "new answer"}) + "\n")
    batch = ["--config", config, "--cache_dir", cache, "--json"]
    batch += ["--edit", str(edited), "--delete", str(deleted)]
    out = io.StringIO()
    assert index_command.execute(index_args(*batch), out) == 0
    after = json.loads(out.getvalue())
    assert after["pool"] == before["pool"] - 1 and after["edited"] == after["deleted"] == 1
    out = io.StringIO()
    assert index_command.execute(index_args(*batch, "--pool-dir", str(tmp_path / "live")), out) == 0
    rows = {row["id"]: row for row in LivePool(tmp_path / "live", None, cache).snapshot().rows}
    assert (
        first not in rows and rows[second]["question"] == ADDED[0] and rows[second]["answer"] == "new answer"
    )
    with pytest.raises(DataError, match=f"question id {first} is not in the pool"):
        index_command.execute(index_args(*batch, "--pool-dir", str(tmp_path / "live")), io.StringIO())
