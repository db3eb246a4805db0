"""Judges that prove they can tell: control pairs from the run's gold answers, the Mann–Whitney AUC and
accept rates, the "no signal" and "constant" marks in results.md, and the cache of the pairs' scores."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from graphctx.evaluation.matrix.judge_controls import JudgeControls, JudgeReport, constant_columns
from graphctx.evaluation.matrix.metric_fingerprints import metric_parts
from graphctx.evaluation.matrix.scorer import Scorer
from graphctx.evaluation.matrix.table import VariantScores, build_table, to_markdown
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics.entries.autoais import AutoAISEntry
from graphctx.metrics.entries.minicheck import MiniCheckEntry
from graphctx.metrics.judge_check import (
    CONTROL_PAIRS,
    MIN_WORDS,
    check_judge,
    control_pairs,
    mann_whitney_auc,
)
from graphctx.metrics.registry import MetricContext, RowMetric
from graphctx.metrics.settings import AutoAISSettings, MetricSettings
from graphctx.model.settings import ModelSpec
from graphctx.prompts import get_variants


class SaysYes(RowMetric):
    """The default run's judge as the issue measured it: accepts every pair whatever the premise."""

    name = "says_yes"
    columns = {"says_yes": "Says yes"}  # noqa: RUF012
    judge_keys = ("says_yes", "says_yes")
    class_path, init_args = "test_judge_controls.SaysYes", {}

    def score_rows(self, questions, generated, gold, premises):
        return {"says_yes": [1.0] * len(generated)}


class Contains(RowMetric):
    """A judge that can tell: accepts a claim that its premise contains word for word."""

    name = "contains"
    columns = {"contains": "Contains"}  # noqa: RUF012
    judge_keys = ("contains", "contains")
    class_path, init_args = "test_judge_controls.Contains", {}

    def score_rows(self, questions, generated, gold, premises):
        return {"contains": [float(g in p) for g, p in zip(generated, premises, strict=True)]}


def context(settings: MetricSettings | None = None) -> MetricContext:
    return MetricContext(settings or MetricSettings(), KnowledgeSettings(), ModelSpec())


def controls_of(rows, entries, cache_dir, seed=0) -> JudgeControls:
    parts = metric_parts(entries, entries[0].settings)
    return JudgeControls.of_rows(rows, seed, str(cache_dir), parts.__getitem__)


def test_control_pairs_are_seeded_gold_sentences_against_their_own_and_anothers_gold(cardano_rows):
    rows = cardano_rows[:80]
    ids, questions = [r["id"] for r in rows], [r["question"] for r in rows]
    golds = [r["answer"] for r in rows]
    pairs = control_pairs(ids, questions, golds, seed=3)
    assert pairs == control_pairs(ids, questions, golds, seed=3)  # deterministic for a seed
    assert pairs.sentences != control_pairs(ids, questions, golds, seed=4).sentences
    assert len(pairs.sentences) == CONTROL_PAIRS and len(set(pairs.row_ids)) == CONTROL_PAIRS
    gold_of = {int(r["id"]): r["answer"] for r in rows}
    for row_id, sentence, own, other in zip(
        pairs.row_ids, pairs.sentences, pairs.supported, pairs.unsupported, strict=True
    ):
        assert own == gold_of[row_id] and sentence in own and len(sentence.split()) >= MIN_WORDS
        assert other != own and other in gold_of.values() and sentence not in other
    assert not control_pairs([1], ["q"], ["One gold answer of several words."], seed=0).sentences


def test_auc_is_mann_whitney_with_ties_counted_half():
    pos, neg = [0.9, 0.5, 0.5, 0.2], [0.5, 0.1, 0.5]
    u = mannwhitneyu(pos, neg).statistic  # scipy's U counts ties half
    assert mann_whitney_auc(pos, neg) == pytest.approx(u / 12)
    assert mann_whitney_auc([1, 1], [1, 1]) == 0.5
    assert math.isnan(mann_whitney_auc([], [1.0]))


def test_a_judge_that_accepts_everything_has_no_signal_and_one_that_tells_has():
    yes = check_judge([1, 1, 1], [0.82] * 3, [1, 1, 1], [0.82] * 3)
    assert (yes.auc, yes.accept_supported, yes.accept_unsupported, yes.verdict) == (0.5, 1, 1, "no signal")
    ranks_but_accepts_all = check_judge([1, 1, 1], [0.9, 0.8, 0.9], [1, 1, 1], [0.6, 0.7, 0.6])
    assert ranks_but_accepts_all.auc == 1 and ranks_but_accepts_all.verdict == "no signal"
    tells = check_judge([1, 1, 0], [0.9, 0.8, 0.4], [0, 0, 1], [0.1, 0.2, 0.6])
    assert tells.verdict == "signal"
    over_limit = check_judge([math.nan] * 3, [math.nan] * 3, [0, 1, 0], [0.1, 0.9, 0.2])
    assert over_limit.n_supported == 0 and over_limit.verdict == "not measured"


def variant_scores(name, scores):
    ids = list(range(len(next(iter(scores.values())))))
    arrays = {key: np.asarray(values, dtype=float) for key, values in scores.items()}
    return VariantScores(get_variants([name])[0], ids, arrays)


def test_the_default_runs_yes_judge_is_marked_no_signal_and_its_constant_column_counted(
    cardano_rows, tmp_path
):
    rows = cardano_rows[:30]
    entries = [SaysYes(context()), Contains(context())]
    controls = controls_of(rows, entries, tmp_path)
    for entry in entries:
        assert controls.pending(entry)
        controls.score(entry, Scorer([entry], None))  # the real row scorer of each plug-in
        assert not controls.pending(entry)  # cached: a rerun judges nothing
    results = [
        variant_scores("TextGen", {"says_yes": [1, 1, 1], "contains": [0, 1, 0], "rouge1": [0.2, 0.3, 0.1]}),
        variant_scores("GraphGen", {"says_yes": [1, 1], "contains": [1, 1], "rouge1": [0.3, 0.2]}),
    ]
    columns = {"rouge1": "ROUGE-1", "says_yes": "Says yes", "contains": "Contains"}
    table = build_table(results, 20, 0, columns=columns)
    report = JudgeReport.of(controls, entries, table, results)
    table.marks = report.marks()
    assert table.marks == {"says_yes": "no signal, constant"}
    markdown = to_markdown(table)
    assert "| Says yes (no signal, constant) | Contains |" in markdown
    section = report.markdown(columns)
    n = len(controls.pairs.sentences)
    assert f"| Says yes | 0.500 | 1.000 | 1.000 | {n} + {n} | no signal |" in section
    assert f"| Contains | 1.000 | 1.000 | 0.000 | {n} + {n} | signal |" in section
    assert "Constant columns (one value on every row of every variant): 1." in section
    assert "- Says yes: 1.0000 on all 5 rows" in section
    saved = json.loads(json.dumps(report.as_json()))
    assert saved["judges"]["says_yes"]["verdict"] == "no signal"
    assert saved["constant_columns"] == {"says_yes": {"value": 1.0, "rows": 5}}


def test_constant_columns_ignore_unscored_rows_and_need_one_value_everywhere():
    results = [
        variant_scores("TextGen", {"a": [1, math.nan], "b": [0.5, 0.5]}),
        variant_scores("GraphGen", {"a": [1, 1], "b": [0.5, 0.6]}),
    ]
    assert constant_columns(results, ["a", "b"]) == {"a": (1.0, 3)}


def test_autoais_controls_are_cached_under_the_judges_fingerprint(cardano_rows, tiny_t5, tmp_path):
    """AutoAIS with the tiny random T5 judge scores the control pairs once; another judge setting scores
    them again."""
    rows = sorted(cardano_rows, key=lambda row: len(row["answer"]))[20:24]  # short premises: a quick judge

    def entry_of(mode):
        settings = AutoAISSettings(
            model=str(tiny_t5), device="cpu", mode=mode, max_input_tokens=2048, max_new_tokens=2
        )
        return AutoAISEntry(context(MetricSettings(autoais=settings)))

    entry = entry_of("answer")
    controls = controls_of(rows, [entry], tmp_path)
    assert controls.pending(entry)
    controls.score(entry, Scorer([entry], None, str(tmp_path)))
    stored = json.loads(controls.path("autoais").read_text())
    assert len(stored["supported"]["accept"]) == len(controls.pairs.sentences) >= 2
    check = controls.check(entry)
    assert check.n_supported == len(controls.pairs.sentences) and 0 <= check.auc <= 1
    assert not controls_of(rows, [entry_of("answer")], tmp_path).pending(entry_of("answer"))
    assert controls_of(rows, [entry_of("sentence")], tmp_path).pending(entry_of("sentence"))


def test_minicheck_is_a_judge_whose_labelled_keys_are_found(cardano_rows, tiny_t5, tmp_path):
    entry = MiniCheckEntry(context(), model=str(tiny_t5), device="cpu")
    controls = controls_of(cardano_rows[:4], [entry], tmp_path)
    controls.score(entry, Scorer([entry], None, str(tmp_path)))
    stored = json.loads(controls.path("minicheck").read_text())
    assert all(0 <= p <= 1 for p in stored["supported"]["score"])  # minicheck_prob[<label>]: P(supported)
    assert set(stored["unsupported"]["accept"]) <= {0.0, 1.0}  # minicheck[<label>]: p > 0.5
    assert controls.check(entry).n_unsupported == len(controls.pairs.sentences)


def test_the_alce_citation_metric_judges_claims_citing_the_premise(cardano_rows, tiny_t5, tmp_path):
    """ALCE's citation recall judges each control sentence cited as ``[1]`` against its premise as the
    one numbered passage: each pair gets the judge's 0/1 verdict (without the passages: NaN)."""
    from graphctx.metrics.entries.citations import CitationEntry

    settings = MetricSettings(autoais=AutoAISSettings(model=str(tiny_t5), device="cpu"))
    entry = CitationEntry(context(settings))
    controls = controls_of(cardano_rows[:4], [entry], tmp_path)
    assert controls.pending(entry)
    controls.score(entry, Scorer([entry], None, str(tmp_path)))
    stored = json.loads(controls.path("alce_citations").read_text())
    for side in ("supported", "unsupported"):
        assert len(stored[side]["accept"]) == len(controls.pairs.sentences)
        assert set(stored[side]["accept"]) <= {0.0, 1.0}
    assert controls.check(entry).n_supported == len(controls.pairs.sentences)


def test_a_run_of_one_question_has_no_control_pairs_and_says_so(cardano_rows, tmp_path):
    entries = [SaysYes(context())]
    controls = controls_of(cardano_rows[:1], entries, tmp_path)
    assert not controls.pending(entries[0])  # nothing to judge
    results = [variant_scores("TextGen", {"says_yes": [1.0]})]
    table = build_table(results, 20, 0, columns={"says_yes": "Says yes"})
    section = JudgeReport.of(controls, entries, table, results).markdown(table.columns)
    assert "| Says yes | | | | 0 | not measured (fewer than 2 rows with such a sentence) |" in section
