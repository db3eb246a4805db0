"""ALCE's citation recall and precision: the aggregation matched against the authors' ``compute_autoais``
(princeton-nlp/ALCE, commit 246c476, ``eval.py``, ``at_most_citations=3``) given the same entailment
decisions, and the metric run end to end on prediction lines with a tiny random T5 judge."""

from __future__ import annotations

import math
import re

import pytest
from tiny_config import TINY

from graphctx.citations import Passage, parse_citations
from graphctx.errors import ConfigError
from graphctx.evaluation.matrix.answering import prediction
from graphctx.evaluation.matrix.scorer import Scorer
from graphctx.generation.decoder import Answer
from graphctx.knowledge.budget import QAPair
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics.citations import citation_scores
from graphctx.metrics.entries.citations import SCORES, CitationEntry
from graphctx.metrics.judges import build_judge
from graphctx.metrics.registry import MetricContext
from graphctx.metrics.settings import AutoAISSettings, MetricSettings
from graphctx.model.settings import ModelSpec
from graphctx.pipeline.config_file import load_config
from graphctx.pipeline.contexts import RetrievedContext
from graphctx.prompts import VARIANTS, EncodedPrompt, build_prompt
from graphctx.retrieval.retriever import Hit
from graphctx.stack.model_stack import ModelStack
from graphctx.stack.report import plan_text

PASSAGES = [
    Passage("Doc one", "A1 holds.").judged,
    Passage("Doc two", "B2 holds.").judged,
    Passage("Doc three", "C3 holds.").judged,
    Passage("Doc four", "A1 and B2 hold.").judged,
]
ANSWERS = [
    "A1 is true [1]. B2 is true [2][3]. Both A1 and B2 [1][2].",
    "A1 and B2 together [4][3]. A1 alone [1][4]. Nothing cited here B2.",
    "C3 is right [3][1][2][4]. A1 out of range [1][7]. A1 comma form [1, 2].",
    "No citations at all for A1. None for B2 either.",
    "Twice A1 [1][1]. B2 needs both [2][1] and C3 [3].",
    "",
    "Plain claim without codes [2].",
]
# compute_autoais(items, at_most_citations=3) on each answer alone and on all of them, items having these
# outputs and docs, with _run_nli_autoais replaced by `entails` below: (citation_rec, citation_prec)
THEIRS_PER_ANSWER = [
    (100.0, 80.0),
    (66.66666666666666, 75.0),
    (66.66666666666666, 50.0),
    (0.0, 0.0),
    (100.0, 80.0),
    (math.nan, math.nan),  # no sentence: their loop skips the answer
    (100.0, 100.0),
]
THEIRS_OVERALL = (72.22222222222221, 64.16666666666666)


def entails(pairs):
    """A deterministic judge: entailed when every code such as ``A1`` of the hypothesis is in the premise."""
    return [all(code in p for code in re.findall(r"\b[A-Z]\d\b", h)) for p, h in pairs]


def test_recall_and_precision_are_alces_given_the_same_decisions():
    asked = []

    def judge(pairs):
        asked.extend(pairs)
        return entails(pairs)

    scores = citation_scores([parse_citations(a) for a in ANSWERS], [PASSAGES] * len(ANSWERS), judge)
    assert [100 * s.recall for s in scores] == pytest.approx([r for r, _ in THEIRS_PER_ANSWER], nan_ok=True)
    assert [100 * s.precision for s in scores] == pytest.approx(
        [p for _, p in THEIRS_PER_ANSWER], nan_ok=True
    )
    recall = [s.recall for s in scores if not math.isnan(s.recall)]
    precision = [s.precision for s in scores if not math.isnan(s.precision)]
    assert (100 * sum(recall) / len(recall), 100 * sum(precision) / len(precision)) == pytest.approx(
        THEIRS_OVERALL
    )
    assert [s.out_of_range for s in scores] == [0, 0, 1, 0, 0, 0, 0]  # "[1][7]" with 4 passages
    assert len(asked) == len(set(asked))  # each input judged once
    # the premise of a sentence citing [4][3]: the passages joined by a newline, as theirs
    assert ("Title: Doc four\nA1 and B2 hold.\nTitle: Doc three\nC3 holds.", "A1 and B2 together.") in asked


QUESTION = "How do I build cardano-node?"
PAIRS = [
    QAPair("How do I build cardano-node?", "Install GHC and cabal, then run `cabal build cardano-node`.", 11),
    QAPair("What is a stake pool?", "A node that produces blocks on behalf of delegators.", 12),
]
ANSWER = "Install GHC and cabal [1]. A stake pool produces blocks [2][1]. Pools pay rewards [5]."


def line_of(variant: str, answer: str, citations: bool) -> dict:
    prompt = build_prompt(VARIANTS[variant], QUESTION, PAIRS, (), citations=citations)
    context = RetrievedContext([Hit(11, 0.9), Hit(12, 0.5)], PAIRS, [])
    encoded = EncodedPrompt([1, 2, 3], prompt, truncated=False, over_limit=False)
    row = {"id": 7, "question": QUESTION, "answer": "Run cabal build."}
    return prediction(VARIANTS[variant], row, context, encoded, Answer(answer, [4, 5], "eos"), 0)


def test_prediction_lines_carry_the_numbered_passages_and_the_parsed_citations():
    line = line_of("Base-GraphGen", ANSWER, citations=True)
    assert line["passages"] == [
        "Title: How do I build cardano-node?\nInstall GHC and cabal, then run `cabal build cardano-node`.",
        "Title: What is a stake pool?\nA node that produces blocks on behalf of delegators.",
    ]
    assert line["citations"] == [
        {"sentence": "Install GHC and cabal.", "passages": [1]},
        {"sentence": "A stake pool produces blocks.", "passages": [2, 1]},
        {"sentence": "Pools pay rewards.", "passages": [5]},  # kept as printed: passage 5 is not there
    ]
    assert line["context"].startswith("Document [1](Title: How do I build cardano-node?): Install GHC")
    plain = line_of("Base-GraphGen", ANSWER, citations=False)
    assert "passages" not in plain and "citations" not in plain  # off: the lines of today


def test_the_metric_scores_prediction_lines_with_the_autoais_judge(tiny_t5):
    settings = MetricSettings(autoais=AutoAISSettings(model=str(tiny_t5), device="cpu", batch_size=2))
    entry = CitationEntry(MetricContext(settings, KnowledgeSettings(), ModelSpec()))
    assert entry.label == f"t5:{tiny_t5.name}" and entry.passages
    lines = [line_of("Base-GraphGen", ANSWER, True), line_of("ZeroShot", ANSWER, True)]
    assert lines[1]["passages"] == []  # no context: nothing to cite, not scored
    scores = Scorer([entry], None, device="cpu").score(
        [r["question"] for r in lines],
        [r["generated"] for r in lines],
        [r["gold"] for r in lines],
        [r["context"] or None for r in lines],
        [r.get("passages") for r in lines],
    )
    label = f"[t5:{tiny_t5.name}]"
    assert set(scores[0]) == {f"{key}{label}" for key in SCORES}
    assert all(math.isnan(value) for value in scores[1].values())
    # the judge's own decisions, aggregated by ALCE's rule, give the row's scores
    judge = build_judge(settings.autoais, device="cpu")
    expected = citation_scores(
        [parse_citations(ANSWER)],
        [lines[0]["passages"]],
        lambda pairs: judge.judge([p for p, _ in pairs], [h for _, h in pairs])[0].tolist(),
    )[0]
    assert scores[0][f"citation_recall{label}"] == expected.recall
    assert scores[0][f"citation_precision{label}"] == expected.precision
    assert scores[0][f"citation_out_of_range{label}"] == 1.0  # "[5]" with 2 passages: not supported
    assert expected.recall <= 2 / 3


def test_a_judge_input_over_the_limit_is_counted_never_cut(tiny_t5):
    autoais = AutoAISSettings(model=str(tiny_t5), device="cpu", max_input_tokens=40)
    entry = CitationEntry(MetricContext(MetricSettings(autoais=autoais), KnowledgeSettings(), ModelSpec()))
    line = line_of("Base-GraphGen", ANSWER, True)
    scores = entry.scorer("cpu", None, None, None)(
        ["q"], [ANSWER], ["g"], [line["context"]], [line["passages"]]
    )
    label = f"[t5:{tiny_t5.name}]"
    assert scores[f"citation_over_limit{label}"] == [1.0]
    assert math.isnan(scores[f"citation_recall{label}"][0])


def test_the_metric_needs_the_prompts_that_ask_for_citations():
    overrides = ["--evaluation.metrics.extra", '[{"class_path": "alce_citations"}]']
    with pytest.raises(
        ConfigError, match=r"\['alce_citations'\] score \[n\] citations.*generation.citations"
    ):
        list(load_config(TINY, overrides).metric_entries)
    config = load_config(TINY, [*overrides, "--generation.citations", "true"])
    entries = config.metric_entries
    assert entries[-1].name == "alce_citations" and entries[-1].at_most == 3
    text = plan_text(ModelStack(config))  # the stand-in judge and both extensions are named
    assert "  citations    ALCE recall and precision, judge lexical-containment [packaged] lexical" in text
    assert "ALCE citation judge" in text and "  extension    generation.citations: ALCE prompts" in text
    assert "stand-in, scores labelled [lexical:containment]" in text
    with pytest.raises(ConfigError, match="at_most_citations: 0 is not an integer"):
        CitationEntry(entries[-1].context, at_most_citations=0)
