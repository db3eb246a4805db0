"""Resumable JSONL records and the results table (intervals, fixed baselines, Holm-corrected paired tests)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from graphctx.errors import DataError
from graphctx.evaluation.jsonl import RecordFile, read_records
from graphctx.evaluation.matrix.table import VariantScores, build_table, to_csv, to_markdown, write_table
from graphctx.evaluation.matrix.tracking import log_results, prediction_rows
from graphctx.evaluation_settings import EvaluationSettings
from graphctx.metrics.rouge import evaluate_mid
from graphctx.metrics.stats import bootstrap_interval, holm, paired_test
from graphctx.prompts import VARIANTS


def test_a_torn_last_line_is_cut_off_and_the_rest_kept(tmp_path):
    path = tmp_path / "predictions.jsonl"
    records = RecordFile(path)
    records.append([{"id": 1, "generated": "a"}, {"id": 2, "generated": "b"}])
    with open(path, "ab") as handle:
        handle.write(b'{"id": 3, "generated": "half a li')  # what a write cut short would leave
    assert [r["id"] for r in read_records(path)] == [1, 2]  # a reader ignores the fragment
    reopened = RecordFile(path)  # a writer repairs it
    assert reopened.done == {1, 2}
    assert path.read_bytes().endswith(b'"b"}\n')
    reopened.append([{"id": 2, "generated": "again"}, {"id": 3, "generated": "c"}])
    lines = path.read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [1, 2, 3]  # the known id 2 was not appended twice
    assert json.loads(lines[1])["generated"] == "b"


def test_nan_scores_are_written_as_null_and_a_broken_middle_line_is_reported(tmp_path):
    path = tmp_path / "scores.jsonl"
    RecordFile(path).append([{"id": 1, "autoais": float("nan")}])
    assert json.loads(path.read_text()) == {"id": 1, "autoais": None}
    path.write_text('{"id": 1}\nnot json\n{"id": 2}\n')
    with pytest.raises(DataError, match="line 2"):
        read_records(path)


def _scores(name: str, ids: list[int], **columns: list[float]) -> VariantScores:
    return VariantScores(
        VARIANTS[name], ids, {key: np.array(values, dtype=float) for key, values in columns.items()}
    )


def test_table_compares_each_graph_variant_with_its_text_twin_holm_corrected(tmp_path):
    """The baselines are fixed before scoring (evaluation.comparisons, default: text twins), never the
    best-scoring baseline picked afterwards: GraphContextGen is compared with TextContextGen even though
    TextGen scores higher; the p-values are Holm-corrected across the table's tests."""
    ids = list(range(8))
    zero = [0.1, 0.2, 0.1, 0.3, 0.2, 0.1, 0.2, 0.3]
    textgen = [0.4, 0.5, 0.3, 0.6, 0.5, 0.4, 0.4, 0.5]
    text_context = [0.3, 0.4, 0.3, 0.5, 0.3, 0.4, 0.3, 0.4]
    graph = [0.6, 0.7, 0.6, 0.8, 0.6, 0.7, 0.5, 0.7]
    judged = [1, 0, 1, 1, 0, 1, 1, np.nan]
    fallbacks = [[True, True], [False, True], *([[False, False]] * 6)]
    results = [
        _scores("ZeroShot", ids, rouge1=zero, **{"autoais[causal-lm-judge]": [np.nan] * 8}),
        _scores("TextGen", ids, rouge1=textgen, **{"autoais[causal-lm-judge]": [0, 0, 1, 0, 0, 1, 0, 0]}),
        _scores("TextContextGen", ids, rouge1=text_context, **{"autoais[causal-lm-judge]": [0] * 8}),
        _scores("GraphContextGen", ids, rouge1=graph, **{"autoais[causal-lm-judge]": judged}),
    ]
    results[3].retrieval_fallbacks = fallbacks
    results[2].prompts = {i: f"text {i}" for i in ids}  # the graph rows 0-2 had the dense hits: same prompt
    results[3].prompts = {i: f"text {i}" if i < 3 else f"graph {i}" for i in ids}
    table = build_table(results, n_resamples=200, seed=0, n_permutations=500)
    assert table.rows[3].same_prompts == (3, 8) and table.rows[1].same_prompts is None
    assert table.keys == ["rouge1", "autoais[causal-lm-judge]"]
    graph_row = table.rows[3]
    assert graph_row.baseline == "TextContextGen"
    assert [row.baseline for row in table.rows[:3]] == [None, None, None]
    assert graph_row.intervals["rouge1"] == bootstrap_interval(graph, n_resamples=200, seed=0)
    assert graph_row.intervals["autoais[causal-lm-judge]"].n == 7  # the NaN row is left out
    expected = paired_test(graph, text_context, n_resamples=200, seed=0, n_permutations=500)
    assert graph_row.comparisons["rouge1"].p_value == expected.p_value
    assert graph_row.comparisons["rouge1"].mean_difference == pytest.approx(np.mean(graph) - 0.3625)
    assert table.comparisons == 2
    raw = [graph_row.comparisons[key].p_value for key in table.keys]
    assert [graph_row.comparisons[key].p_holm for key in table.keys] == list(holm(raw))
    assert all(row.comparisons["rouge1"] is None for row in table.rows[:3])
    assert graph_row.linkage["no_edge"] == 1 and graph_row.linkage["topped_up"] == 1
    assert table.rows[1].linkage is None  # a dense variant

    markdown = to_markdown(table)
    header = (
        "| Variant | ROUGE-1 | ROUGE-1 (bootstrap mid, as evaluate) "
        "| AutoAIS (whole context) [causal-lm-judge] |"
    )
    assert header in markdown
    assert "| Variant | vs | same prompt | ROUGE-1 | AutoAIS (whole context) [causal-lm-judge] |" in markdown
    assert "| GraphContextGen | TextContextGen | 3/8 | " in markdown
    mid = evaluate_mid({"rouge1": graph}, seed=0)["rouge1"]
    assert graph_row.evaluate_mids == {"rouge1": mid}
    assert f"| GraphContextGen | {graph_row.intervals['rouge1'].mean:.4f} [" in markdown
    assert f"(n=8) | {mid:.4f} | " in markdown
    assert "| Zero-shot | 0.1875 [" in markdown and "| n/a |" in markdown
    assert "Holm-corrected across the table's 2 tests" in markdown
    assert "| GraphContextGen | TextContextGen | 3/8 | +0.2875 (p=" in markdown
    assert "- GraphContextGen: 7 of 8 queries (87.5%) link to the graph; 1 with no edge above T" in markdown
    csv_lines = to_csv(table).splitlines()
    header = "variant,label,model,retrieval,knowledge,pairs,compared_with,answered,prompts_truncated,"
    assert csv_lines[0].startswith(header + "prompts_over_limit,autoais_judged,autoais_over_limit,rouge1,")
    assert ",rouge1_p_holm,rouge1_evaluate_mid,autoais[causal-lm-judge]," in csv_lines[0]
    assert csv_lines[0].endswith(
        ",kg_lost_entities,fact_sentences_cut,baseline_fallbacks,graph_linked,graph_no_edge,graph_topped_up"
    )
    assert csv_lines[4].startswith(
        "GraphContextGen,GraphContextGen,adapter,graph,True,True,TextContextGen,8,0,0,7,0,0.65"
    )
    assert csv_lines[4].endswith(",0,7,1,1") and csv_lines[1].endswith(",0,,,")
    paths = write_table(table, tmp_path)
    assert paths["markdown"].read_text() == markdown
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv", "results.md"]  # no temporaries left


def test_results_and_predictions_go_to_an_offline_wandb_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    ids = [1, 2, 3]
    results = [
        _scores("ZeroShot", ids, rouge1=[0.1, 0.2, 0.3]),
        _scores("GraphGen", ids, rouge1=[0.3, 0.4, 0.2]),
    ]
    table = build_table(results, n_resamples=50)
    files = {}
    for result in results:
        predictions, scores = (
            tmp_path / f"{result.variant.name}.jsonl",
            tmp_path / f"{result.variant.name}.scores.jsonl",
        )
        RecordFile(predictions).append(
            {"id": i, "question": "q", "context": "", "generated": "g", "gold": "a"} for i in ids
        )
        RecordFile(scores).append(
            {"id": i, "rouge1": v} for i, v in zip(ids, result.scores["rouge1"], strict=True)
        )
        files[result.variant.name] = (predictions, scores)
    columns, rows = prediction_rows(
        RecordFile(files["GraphGen"][0]).records, RecordFile(files["GraphGen"][1]).records
    )
    assert columns == ["id", "question", "context", "generated", "gold", "rouge1"]
    assert [row[-1] for row in rows] == [0.3, 0.4, 0.2]
    log_results(EvaluationSettings(), tmp_path / "tiny.yaml", table, files, tmp_path)
    (run,) = (tmp_path / "wandb").glob("offline-run-*")
    assert list(run.glob("*.wandb"))


def test_table_reports_cut_prompts_autoais_coverage_and_each_metrics_model():
    ids = list(range(6))
    over_limit = [0.0, 1.0, 0.0, 1.0, np.nan, 0.0]  # NaN: a row without a context (nothing to judge)
    judged = [1.0, np.nan, 0.0, np.nan, np.nan, 1.0]
    result = VariantScores(
        VARIANTS["GraphContextGen"],
        ids,
        {
            "rouge1": np.full(6, 0.5),
            "autoais[t5:tiny]": np.array(judged),
            "autoais_over_limit[t5:tiny]": np.array(over_limit),
            "fact_sentences_cut": np.array([0.0, 2.0, 0.0, 1.0, 0.0, 0.0]),
        },
        prompts_truncated=2,
        prompts_over_limit=1,
    )
    models = {"AutoAIS": "tiny (t5) — stand-in, scores labelled [t5:tiny]"}
    table = build_table([result], n_resamples=50, models=models)
    row = table.rows[0]
    assert (row.answered, row.prompts_truncated, row.prompts_over_limit) == (6, 2, 1)
    assert (row.autoais_judged, row.autoais_over_limit, row.fact_sentences_cut) == (3, 2, 3)
    assert table.keys == ["rouge1", "autoais[t5:tiny]"]  # the over-limit flags are coverage, not a metric
    markdown = to_markdown(table)
    assert "| GraphContextGen | 6 | 2 | 1 | 3/5 | 2 | 0 | 3 | 0 |" in markdown
    assert "- AutoAIS: tiny (t5) — stand-in, scores labelled [t5:tiny]" in markdown


def test_context_budget_counts_the_generation_models_tokens(
    tmp_path, cardano_rows, smollm2_tokenizer, llama_tokenizer
):
    """``knowledge.tokenizer: ""`` counts ``token_budget`` in the generation model's tokens (not words), so
    a context of the budget takes that many tokens of the prompt; a named tokenizer counts in its own."""
    from graphctx.knowledge.settings import KnowledgeSettings
    from graphctx.model.loading import packaged_llama_sentencepiece
    from graphctx.pipeline.contexts import ContextBuilder
    from graphctx.retrieval.settings import RetrievalSettings

    text = cardano_rows[0]["answer"]
    builder = ContextBuilder(
        cardano_rows, RetrievalSettings(), KnowledgeSettings(), tokenizer=smollm2_tokenizer
    )
    tokens = len(smollm2_tokenizer(text, add_special_tokens=False)["input_ids"])
    assert builder.count_tokens(text) == tokens != len(text.split())
    sentencepiece = tmp_path / "tokenizer.model"
    sentencepiece.write_bytes(packaged_llama_sentencepiece().read_bytes())
    named = KnowledgeSettings(tokenizer=str(sentencepiece))
    builder = ContextBuilder(cardano_rows, RetrievalSettings(), named, tokenizer=smollm2_tokenizer)
    assert builder.count_tokens(text) == len(llama_tokenizer(text, add_special_tokens=False)["input_ids"])
