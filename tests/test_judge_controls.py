"""Judges that prove they can tell: control pairs from the run's gold answers, the Mann–Whitney AUC and
accept rates, the "no signal" and "constant" marks in results.md, and the cache of the pairs' scores."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from graphctx.evaluation.matrix.judge_controls import (
    JudgeControls,
    JudgeReport,
    constant_columns,
    near_constant_columns,
)
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
    fact_tokens,
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


class SameWords(RowMetric):
    """A judge of topics: accepts a claim when most of its words stand somewhere in its premise."""

    name = "same_words"
    columns = {"same_words": "Same words", "same_words_share": "Same words, share"}  # noqa: RUF012
    judge_keys = ("same_words", "same_words_share")
    class_path, init_args = "test_judge_controls.SameWords", {}

    def score_rows(self, questions, generated, gold, premises):
        shares = [
            sum(w in set(p.lower().split()) for w in g.lower().split()) / len(g.split())
            for g, p in zip(generated, premises, strict=True)
        ]
        return {"same_words": [float(share >= 0.6) for share in shares], "same_words_share": shares}


def controls_of(rows, entries, cache_dir, seed=0, pool=()) -> JudgeControls:
    parts = metric_parts(entries, entries[0].settings)
    return JudgeControls.of_rows(rows, seed, str(cache_dir), parts.__getitem__, pool)


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
    assert pairs.neighbour == [None] * CONTROL_PAIRS and pairs.swapped == [None] * CONTROL_PAIRS  # no pool


def test_hard_pairs_are_the_nearest_pool_answer_and_the_own_answer_with_one_fact_swapped(cardano_rows):
    rows, pool = cardano_rows[:80], cardano_rows[80:]
    ids, questions, golds = (
        [r["id"] for r in rows],
        [r["question"] for r in rows],
        [r["answer"] for r in rows],
    )
    pool_q, pool_a = [r["question"] for r in pool], [r["answer"] for r in pool]
    pairs = control_pairs(ids, questions, golds, 3, pool_questions=pool_q, pool_answers=pool_a)
    assert pairs == control_pairs(ids, questions, golds, 3, pool_questions=pool_q, pool_answers=pool_a)
    for sentence, own, near in zip(pairs.sentences, pairs.supported, pairs.neighbour, strict=True):
        assert near in pool_a and sentence not in near and near != own
    swapped = [
        (s, own, sw) for s, own, sw in zip(pairs.sentences, pairs.supported, pairs.swapped, strict=True) if sw
    ]
    assert len(swapped) >= 10  # cardano answers state versions, flags, commands and numbers
    pool_facts = {token for a in pool_a for _, token in fact_tokens(a)}
    for sentence, own, premise in swapped:
        assert sentence not in premise and premise != own
        own_facts, premise_facts = set(fact_tokens(own)), set(fact_tokens(premise))
        gone = {t for t in fact_tokens(sentence) if t in own_facts - premise_facts}
        added = {t for _, t in premise_facts - own_facts}
        assert len(gone) >= 1 and added and added <= pool_facts  # one fact out, a pool fact in its place


def test_fact_tokens_take_versions_flags_names_and_code_spans_once():
    text = "Run `cardano-cli query tip` with --mainnet on node 1.35.4, then wait 20 minutes for cardano-node."
    assert fact_tokens(text) == [
        ("code", "`cardano-cli query tip`"),
        ("flag", "--mainnet"),
        ("version", "1.35.4"),
        ("number", "20"),
        ("name", "cardano-node"),
    ]


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
    entries = [SaysYes(context()), Contains(context()), SameWords(context())]
    controls = controls_of(rows, entries, tmp_path, pool=cardano_rows[30:])
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
    n, pairs = len(controls.pairs.sentences), controls.pairs
    swaps = sum(p is not None for p in pairs.swapped)
    assert swaps >= 2 and all(p is not None for p in pairs.neighbour)
    assert (
        f"| Says yes | 0.500 | 0.500 | 0.500 | 1.000 | 1.000 | 1.000 | 1.000 | {n} + ({n} + {n} + {swaps}) "
        "| no signal |" in section
    )
    assert (
        f"| Contains | 1.000 | 1.000 | 1.000 | 1.000 | 0.000 | 0.000 | 0.000 | {n} + ({n} + {n} + {swaps}) "
        "| signal |" in section
    )
    same_words = report.checks["same_words"][1]  # tells topics apart, not a swapped fact
    assert same_words["other_question"].signal and not same_words["swapped_fact"].signal
    assert f"| {n} + ({n} + {n} + {swaps}) | topic only |" in section
    assert "Constant columns (one value on every row of every variant): 1." in section
    assert "- Says yes: 1.0000 on all 5 rows" in section
    saved = json.loads(json.dumps(report.as_json()))
    assert saved["judges"]["says_yes"]["verdict"] == "no signal"
    assert saved["judges"]["same_words"]["verdict"] == "topic only"
    assert saved["judges"]["contains"]["kinds"]["swapped_fact"]["auc"] == 1
    assert saved["constant_columns"] == {"says_yes": {"value": 1.0, "rows": 5}}


def test_constant_columns_ignore_unscored_rows_and_need_one_value_everywhere():
    results = [
        variant_scores("TextGen", {"a": [1, math.nan], "b": [0.5, 0.5]}),
        variant_scores("GraphGen", {"a": [1, 1], "b": [0.5, 0.6]}),
    ]
    assert constant_columns(results, ["a", "b"]) == {"a": (1.0, 3)}


def test_a_column_with_one_value_on_most_rows_is_marked_no_signal(cardano_rows, tmp_path):
    """The tiny default's triplet fact score: 0 on all but one row of the matrix tells nothing; a column
    that is one value on 9 of 10 rows is marked (at least 90%), and one on 8 of 10 is not."""
    fact = [0.0] * 19 + [0.5]
    results = [
        variant_scores(
            "TextGen", {"fact": fact[:10], "mostly": [0.0] * 9 + [1.0], "some": [0.0] * 8 + [1, 1]}
        ),
        variant_scores(
            "GraphGen", {"fact": fact[10:], "mostly": [0.0] * 9 + [1.0], "some": [0.0] * 8 + [1, 1]}
        ),
    ]
    assert near_constant_columns(results, ["fact", "mostly", "some"]) == {
        "fact": (0.0, 19, 20),
        "mostly": (0.0, 18, 20),
    }
    columns = {"fact": "Fact score", "mostly": "Mostly", "some": "Some"}
    table = build_table(results, 20, 0, columns=columns)
    controls = controls_of(cardano_rows[:3], [SaysYes(context())], tmp_path)
    report = JudgeReport.of(controls, [], table, results)  # no judge among the metrics
    table.marks = report.marks()
    assert table.marks == {"fact": "no signal", "mostly": "no signal"}
    assert "| Fact score (no signal) | Mostly (no signal) | Some |" in to_markdown(table)
    section = report.markdown(columns)
    assert "Columns with one value on at least 90% of their rows (marked no signal): 2." in section
    assert "- Fact score: 0.0000 on 19 of 20 rows" in section
    assert report.as_json()["near_constant_columns"]["fact"] == {"value": 0.0, "rows": 19, "scored_rows": 20}


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
    check = controls.checks(entry)["other_question"]
    assert check.n_supported == len(controls.pairs.sentences) and 0 <= check.auc <= 1
    assert not controls_of(rows, [entry_of("answer")], tmp_path).pending(entry_of("answer"))
    assert controls_of(rows, [entry_of("sentence")], tmp_path).pending(entry_of("sentence"))


def test_minicheck_is_a_judge_whose_labelled_keys_are_found(cardano_rows, tiny_t5, tmp_path):
    entry = MiniCheckEntry(context(), model=str(tiny_t5), device="cpu")
    controls = controls_of(cardano_rows[:4], [entry], tmp_path)
    controls.score(entry, Scorer([entry], None, str(tmp_path)))
    stored = json.loads(controls.path("minicheck").read_text())
    assert all(0 <= p <= 1 for p in stored["supported"]["score"])  # minicheck_prob[<label>]: P(supported)
    assert set(stored["other_question"]["accept"]) <= {0.0, 1.0}  # minicheck[<label>]: p > 0.5
    assert controls.checks(entry)["other_question"].n_unsupported == len(controls.pairs.sentences)


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
    for side in ("supported", "other_question"):
        assert len(stored[side]["accept"]) == len(controls.pairs.sentences)
        assert set(stored[side]["accept"]) <= {0.0, 1.0}
    assert controls.checks(entry)["other_question"].n_supported == len(controls.pairs.sentences)


def test_a_run_of_one_question_has_no_control_pairs_and_says_so(cardano_rows, tmp_path):
    entries = [SaysYes(context())]
    controls = controls_of(cardano_rows[:1], entries, tmp_path)
    assert not controls.pending(entries[0])  # nothing to judge
    results = [variant_scores("TextGen", {"says_yes": [1.0]})]
    table = build_table(results, 20, 0, columns={"says_yes": "Says yes"})
    section = JudgeReport.of(controls, entries, table, results).markdown(table.columns)
    assert "| Says yes | | | | | | | | 0 | not measured (fewer than 2 rows with such a sentence) |" in section


def test_the_lexical_judge_tells_supported_from_every_kind_of_unsupported_pair(cardano_rows, tmp_path):
    """The tiny default's AutoAIS stand-in, through AutoAIS's own answer-mode template, on pairs of rows it
    has no state from: AUC ≥ 0.8 on each kind, and a verdict of signal."""
    from graphctx.evaluation.matrix.judge_controls import verdict

    entry = AutoAISEntry(context(MetricSettings(autoais=AutoAISSettings(model="lexical-containment"))))
    assert entry.label == "lexical:containment" and entry.judge.protocol == "lexical"
    controls = controls_of(cardano_rows[:60], [entry], tmp_path, pool=cardano_rows[60:])
    controls.score(entry, Scorer([entry], None, str(tmp_path)))
    checks = controls.checks(entry)
    assert all(check.auc >= 0.8 for check in checks.values()), {k: c.auc for k, c in checks.items()}
    assert checks["swapped_fact"].n_unsupported >= 10 and verdict(checks) == "signal"


def test_the_lexical_judge_reads_the_templated_answer_as_the_claim_and_misses_a_swapped_version():
    from graphctx.metrics.lexical_judge import ACCEPT_AT, LexicalJudge, containment

    premise = "Upgrade the node to 1.35.4 and restart it with the --mainnet flag."
    judge = LexicalJudge(AutoAISSettings().hypothesis_template)
    claim = "The answer to the question 'Which version fixes the sync bug?' is 'upgrade the node to 1.35.4'"
    assert judge.claim(premise, claim)[1] == "upgrade the node to 1.35.4"
    entailed, soft = judge.judge([premise, premise.replace("1.35.4", "1.34.1")], [claim, claim])
    assert entailed.tolist() == [True, False] and soft[0] == 1 and soft[1] < ACCEPT_AT
    assert containment(premise, "restart it with the mainnet flag") == 1
    assert containment(premise, "delete the wallet") < 0.5
