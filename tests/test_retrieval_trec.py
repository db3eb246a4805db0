"""Retrieval-eval's TREC files: ir-measures (trec_eval's measures) scores them exactly as graphctx does —
graded gains, rank order under tied scores, empty rankings, relevant questions past the cut-off — and a
new sweep replaces the old run files."""

from __future__ import annotations

import json
from pathlib import Path

import ir_measures
import numpy as np
import pytest
import torch
from ir_measures import RR, R, nDCG

from graphctx.evaluation.retrieval_eval.judge import Pool, Queries, evaluate_retrieval, scored_rows
from graphctx.evaluation.retrieval_eval.measures import per_query_scores
from graphctx.evaluation.retrieval_eval.report import write_report
from graphctx.evaluation.retrieval_eval.trec import QRELS, qrels_text, run_name, run_text
from graphctx.retrieval.settings import RetrievalSettings

TOLERANCE = 1e-9


def ir_measures_of(recall_ks: list[int], depth: int = 10) -> dict[str, object]:
    """graphctx's metric name -> the ir-measures measure that defines it the same way (gain 2^g - 1)."""
    return {
        **{f"recall@{k}": R @ k for k in recall_ks},
        f"mrr@{depth}": RR @ depth,
        f"ndcg@{depth}": nDCG(gains={1: 1, 2: 3}) @ depth,
    }


def ir_measures_per_query(qrels: Path, run: Path, measures: dict[str, object]) -> dict[str, dict[str, float]]:
    """graphctx metric name -> query id -> ir-measures' value, every query of the qrels included."""
    names = {measure: name for name, measure in measures.items()}
    values: dict[str, dict[str, float]] = {name: {} for name in measures}
    found = ir_measures.iter_calc(
        list(measures.values()),
        list(ir_measures.read_trec_qrels(str(qrels))),
        list(ir_measures.read_trec_run(str(run))),
    )
    for metric in found:
        values[names[metric.measure]][metric.query_id] = metric.value
    return values


def assert_ir_measures_agree(folder: Path, recall_ks: list[int]) -> None:
    """Every run file of a report folder: ir-measures' mean of each metric over the qrels' queries equals
    results.json's within :data:`TOLERANCE`."""
    document = json.loads((folder / "results.json").read_text())
    files = document["files"]["trec"]
    measures = ir_measures_of(recall_ks)
    qrels = list(ir_measures.read_trec_qrels(files[QRELS]))
    expected = {run_name(method): result for method, result in document["methods"].items()}
    expected |= {run_name("graph", result["threshold"]): result for result in document["sweep"]}
    assert set(files) == {QRELS, *expected}
    for name, result in expected.items():
        means = ir_measures.calc_aggregate(
            list(measures.values()), qrels, list(ir_measures.read_trec_run(files[name]))
        )
        for metric, measure in measures.items():
            assert abs(means[measure] - result[metric]["mean"]) <= TOLERANCE, (name, metric)


def test_ir_measures_computes_graphctx_metrics_per_query(tmp_path):
    """Grades 2 and 1, a relevant question at rank 11 (past the cut-off) and past an empty slot, a query
    with nothing retrieved, and ids whose string order is not the rank order (tools break score ties by
    id: the rank-derived scores keep graphctx's order). Shown failing once with every score written as 1."""
    query_ids = [101, 102, 103, 104]
    relevance = [{9: 2, 7: 1}, {55: 1, 100: 2}, {4: 1}, {8: 2}]
    rankings = [
        [30, 9, 100, 7],
        [-1, *range(200, 209), 55, 100],  # 55 is 10th once the empty slot is dropped, 100 11th
        [],
        [-1, -1, 8],
    ]
    depth, recall_ks = 10, [1, 2, 10]
    rows = scored_rows(rankings, max(depth, *recall_ks))
    (tmp_path / "qrels.txt").write_text(qrels_text(query_ids, relevance))
    (tmp_path / "run.txt").write_text(run_text(query_ids, rows, "graphctx.test"))
    graphctx = per_query_scores(rankings, relevance, recall_ks, depth)
    theirs = ir_measures_per_query(tmp_path / "qrels.txt", tmp_path / "run.txt", ir_measures_of(recall_ks))
    for name, values in graphctx.items():
        got = [theirs[name].get(str(query), 0.0) for query in query_ids]
        assert np.abs(np.asarray(got) - values).max() <= TOLERANCE, (name, got, values.tolist())
    # the mean over the qrels' queries: the query with nothing retrieved (no run line) counts 0 there too
    measures = ir_measures_of(recall_ks)
    means = ir_measures.calc_aggregate(
        list(measures.values()),
        list(ir_measures.read_trec_qrels(str(tmp_path / "qrels.txt"))),
        list(ir_measures.read_trec_run(str(tmp_path / "run.txt"))),
    )
    assert "103 " not in (tmp_path / "run.txt").read_text()
    for name, measure in measures.items():
        assert abs(means[measure] - graphctx[name].mean()) <= TOLERANCE, name
    assert graphctx["ndcg@10"][0] not in (0.0, 1.0) and graphctx["mrr@10"][0] == 0.5
    assert graphctx["recall@10"][1] == 0.5  # 100 is 11th: past the cut-off for both


def test_run_text_refuses_a_repeated_question_and_names_the_query():
    with pytest.raises(ValueError, match="query 5: a ranking lists a pool question twice"):
        run_text([5], [[3, 3]], "t")


def synthetic(seed: int = 0) -> tuple[Pool, Queries]:
    """A pool of 40 questions and 6 queries near some of them (real embeddings geometry, real BM25 texts)."""
    generator = torch.Generator().manual_seed(seed)
    words = ["node", "sync", "stake", "pool", "wallet", "ledger", "fee", "token", "script", "epoch"]
    pool_embeddings = torch.nn.functional.normalize(torch.randn(40, 16, generator=generator), dim=1)
    pool_ids = [1000 + 7 * i for i in range(40)]
    pool_texts = [f"{words[i % 10]} {words[(3 * i) % 10]} question {i}" for i in range(40)]
    targets = [[0, 5], [12], [20, 21, 22], [33], [7], [39, 2]]
    embeddings, relevance, texts = [], [], []
    for number, chosen in enumerate(targets):
        mix = pool_embeddings[chosen].mean(0) + 0.3 * torch.randn(16, generator=generator)
        embeddings.append(mix)
        relevance.append({pool_ids[c]: 2 if j == 0 else 1 for j, c in enumerate(chosen)})
        texts.append(f"{pool_texts[chosen[0]]} again {number}")
    queries = Queries(
        [5000 + n for n in range(len(targets))],
        texts,
        torch.nn.functional.normalize(torch.stack(embeddings), dim=1),
        relevance,
    )
    return Pool(pool_ids, pool_texts, pool_embeddings), queries


def test_report_trec_files_agree_with_results_and_a_new_sweep_replaces_the_old(tmp_path):
    pool, queries = synthetic()
    settings = RetrievalSettings(threshold=0.3, top_k=2)
    evaluation = evaluate_retrieval(pool, queries, settings, [0.2, 0.45], [2, 5], n_resamples=50)
    document = write_report(evaluation, {"split": "test"}, tmp_path)
    trec = tmp_path / "trec"
    assert sorted(p.name for p in trec.iterdir()) == [
        "qrels.txt",
        "run.bm25.txt",
        "run.dense.txt",
        "run.graph.T0.20.txt",
        "run.graph.T0.45.txt",
        "run.graph.txt",
        "run.hybrid.txt",
    ]
    assert document["files"]["trec"]["run.bm25.txt"] == str(trec / "run.bm25.txt")
    assert " 0 1000 2\n" in (trec / "qrels.txt").read_text()  # duplicates are grade 2
    assert_ir_measures_agree(tmp_path, [2, 5])
    again = evaluate_retrieval(pool, queries, settings, [0.6], [2, 5], n_resamples=50)
    write_report(again, {"split": "test"}, tmp_path)
    assert sorted(p.name for p in trec.glob("run.graph.T*")) == ["run.graph.T0.60.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # nothing staged is left
    assert_ir_measures_agree(tmp_path, [2, 5])


def test_the_examples_of_the_trec_module_run_as_written():
    import doctest

    from graphctx.evaluation.retrieval_eval import judge as retrieval_eval
    from graphctx.evaluation.retrieval_eval import trec

    for module in (trec, retrieval_eval):
        result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
        assert result.attempted > 0 and result.failed == 0, module.__name__
