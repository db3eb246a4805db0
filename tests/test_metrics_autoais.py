"""AutoAIS: the exact judge inputs, the T5 NLI and causal-LM judges on tiny random models, sentence mode,
premises that are too long, and state merging."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
)

from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics import AutoAIS, AutoAISSettings, CausalLMJudge, T5NliJudge, build_judge, nli_input
from graphctx.metrics.registry import MetricContext, metric_entries
from graphctx.metrics.settings import MetricSettings
from graphctx.model.loading import build_tiny_random
from graphctx.model.settings import TINY_RANDOM, ModelSpec

QUESTION = "How do I delegate ADA?"
PREMISE = (
    "To delegate ADA, open Daedalus or Yoroi, pick a stake pool and sign a delegation certificate. "
    "The deposit of 2 ADA is returned when you deregister."
)
ANSWER = "Pick a stake pool in your wallet and sign a delegation certificate. The deposit is 2 ADA."


@pytest.fixture(scope="module")
def t5_judge(tiny_t5) -> T5NliJudge:
    judge = build_judge(AutoAISSettings(model=str(tiny_t5), device="cpu", batch_size=2, max_new_tokens=1))
    assert isinstance(judge, T5NliJudge)
    return judge


@pytest.fixture(scope="module")
def llama_judge(tmp_path_factory) -> CausalLMJudge:
    cache = str(tmp_path_factory.mktemp("cache"))
    judge = build_judge(AutoAISSettings(model=TINY_RANDOM, device="cpu", batch_size=2), cache_dir=cache)
    assert isinstance(judge, CausalLMJudge)
    return judge


def test_judge_input_is_the_autoais_string_byte_for_byte(t5_judge):
    metric = AutoAIS(t5_judge)
    (hypothesis,) = metric.hypotheses(QUESTION, ANSWER)
    assert hypothesis == (
        "The answer to the question 'How do I delegate ADA?' is 'Pick a stake pool in your wallet and sign "
        "a delegation certificate. The deposit is 2 ADA.'"
    )
    assert nli_input("P.", "H.") == "premise: P. hypothesis: H."
    assert t5_judge.texts([PREMISE], [hypothesis]) == [f"premise: {PREMISE} hypothesis: {hypothesis}"]


def _generated_text_is_one(judge: T5NliJudge, text: str) -> bool:
    encoded = judge.tokenizer(text, return_tensors="pt")
    generated = judge.model.generate(**encoded, max_new_tokens=1, do_sample=False)
    return judge.tokenizer.decode(generated[0], skip_special_tokens=True).strip() == "1"


def test_t5_judge_entails_iff_the_generated_text_is_1(t5_judge):
    one = t5_judge.tokenizer("1", add_special_tokens=False)["input_ids"][-1]
    everything_but_one = [i for i in range(t5_judge.model.config.vocab_size) if i != one]
    premises, hypotheses = [PREMISE, "Short premise."], ["A hypothesis.", "Another, longer hypothesis here."]
    texts = t5_judge.texts(premises, hypotheses)
    config = t5_judge.model.generation_config
    try:
        config.suppress_tokens = everything_but_one  # the model can only say "1"
        entailed, _ = t5_judge.judge(premises, hypotheses)
        assert entailed.tolist() == [True, True] == [_generated_text_is_one(t5_judge, t) for t in texts]
        config.suppress_tokens = [one]  # the model can say anything but "1"
        entailed, _ = t5_judge.judge(premises, hypotheses)
        assert entailed.tolist() == [False, False] == [_generated_text_is_one(t5_judge, t) for t in texts]
    finally:
        config.suppress_tokens = None


def test_t5_soft_score_is_p1_under_teacher_forcing(t5_judge):
    premises, hypotheses = (
        [PREMISE, "Short."],
        ["A hypothesis.", "Another hypothesis, longer than the first."],
    )
    _, soft = t5_judge.judge(premises, hypotheses)  # one padded batch of two
    label = t5_judge.tokenizer("1", add_special_tokens=False, return_tensors="pt")["input_ids"]
    for text, score in zip(t5_judge.texts(premises, hypotheses), soft, strict=True):
        encoded = t5_judge.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            logits = t5_judge.model(**encoded, labels=label).logits[0]
        expected = logits.log_softmax(-1).gather(-1, label[0, :, None]).sum().exp()
        assert score.item() == pytest.approx(expected.item(), rel=1e-4)
        assert 0 < score < 1


def test_causal_judge_scores_p1_against_p0_at_the_reply(llama_judge):
    premises = [PREMISE, "Short premise.", "Another premise of medium length here."]
    hypotheses = ["First hypothesis.", "Second.", "Third hypothesis."]
    entailed, soft = llama_judge.judge(premises, hypotheses)  # left-padded batches of two, longest first
    tokenizer = llama_judge.tokenizer
    assert not tokenizer.chat_template
    for premise, hypothesis, score, decided in zip(premises, hypotheses, soft, entailed, strict=True):
        prompt = llama_judge.prompt(premise, hypothesis)
        assert prompt.endswith(f"{nli_input(premise, hypothesis)}\nAnswer:")
        with_one = tokenizer(prompt + " 1")["input_ids"]
        with_zero = tokenizer(prompt + " 0")["input_ids"]
        with torch.no_grad():
            logits = llama_judge.model(torch.tensor([with_one[:-1]])).logits[0, -1]
        expected = torch.stack([logits[with_one[-1]], logits[with_zero[-1]]]).softmax(-1)[0]
        assert score.item() == pytest.approx(expected.item(), abs=1e-5)
        assert decided.item() == (expected.item() > 0.5)


def test_causal_judge_output_is_labelled(llama_judge):
    metric = AutoAIS(llama_judge)
    metric.update([QUESTION], [ANSWER], [PREMISE])
    keys = {"autoais[causal-lm:tiny-random]", "autoais_soft[causal-lm:tiny-random]"}
    keys.add("autoais_over_limit[causal-lm:tiny-random]")
    assert set(metric.compute()) == keys and set(metric.per_row()) == keys


def test_sentence_mode_scores_the_fraction_of_entailed_sentences(llama_judge):
    metric = AutoAIS(llama_judge, AutoAISSettings(mode="sentence"))
    answer = "Pick a stake pool in your wallet. Sign the delegation certificate! Is the deposit 2 ADA?"
    sentences = metric.hypotheses(QUESTION, answer)
    assert sentences == [
        "Pick a stake pool in your wallet.",
        "Sign the delegation certificate!",
        "Is the deposit 2 ADA?",
    ]
    metric.update([QUESTION, QUESTION], [answer, ""], [PREMISE, PREMISE])
    entailed, soft = llama_judge.judge([PREMISE] * 3, sentences)
    rows = metric.per_row()
    hard, soft_rows = rows["autoais[causal-lm:tiny-random]"], rows["autoais_soft[causal-lm:tiny-random]"]
    assert hard.tolist() == pytest.approx([entailed.double().mean().item(), 0.0])
    assert soft_rows.tolist() == pytest.approx([soft.double().mean().item(), 0.0])


@pytest.mark.parametrize("mode", ["answer", "sentence"])
def test_too_long_premises_are_counted_and_left_out_never_cut(tiny_t5, t5_judge, mode):
    settings = AutoAISSettings(mode=mode)
    short_metric = AutoAIS(t5_judge, settings)
    long_premise = " ".join([PREMISE] * 20)
    pairs = [(p, h) for h in short_metric.hypotheses(QUESTION, ANSWER) for p in (PREMISE, long_premise)]
    lengths = t5_judge.input_lengths(*zip(*pairs, strict=True))
    limit = max(length for (p, _), length in zip(pairs, lengths, strict=True) if p == PREMISE)
    assert limit < min(length for (p, _), length in zip(pairs, lengths, strict=True) if p == long_premise)

    tokenizer = AutoTokenizer.from_pretrained(tiny_t5)
    limited = T5NliJudge(t5_judge.model, tokenizer, max_input_tokens=limit, max_new_tokens=1)
    metric = AutoAIS(limited, settings)
    metric.update([QUESTION, QUESTION], [ANSWER, ANSWER], [long_premise, PREMISE])
    short_metric.update([QUESTION], [ANSWER], [PREMISE])

    rows = metric.per_row()
    assert math.isnan(rows["autoais"][0]) and math.isnan(rows["autoais_soft"][0])
    short_soft = short_metric.per_row()[short_metric.output_key("autoais_soft")][0].item()
    assert rows["autoais_soft"][1].item() == pytest.approx(short_soft)
    assert rows["autoais_over_limit"].tolist() == [1.0, 0.0]  # counted per row, never cut
    result = metric.compute()
    assert result["autoais_soft"].item() == pytest.approx(rows["autoais_soft"][1].item())

    metric.update([QUESTION], [ANSWER], [long_premise])  # a batch with nothing the judge may read
    assert metric.per_row()["autoais_over_limit"].sum().item() == 2
    assert len(metric.per_row()["autoais"]) == 3


def test_the_t5_judge_reads_the_whole_premise_past_its_tokenizers_512(tiny_t5, t5_judge):
    """T5's relative positions take any length: model_max_length (512) is not the judge's limit."""
    assert AutoTokenizer.from_pretrained(tiny_t5).model_max_length == 512
    assert t5_judge.max_input_tokens == 4096 and t5_judge.label == f"t5:{tiny_t5.name}"
    long_premise = " ".join([PREMISE] * 25)
    metric = AutoAIS(t5_judge)
    assert t5_judge.input_lengths([long_premise], metric.hypotheses(QUESTION, ANSWER))[0] > 512
    metric.update([QUESTION], [ANSWER], [long_premise])
    rows = metric.per_row()
    assert not math.isnan(rows[metric.output_key("autoais")][0])
    assert rows[metric.output_key("autoais_over_limit")].tolist() == [0.0]


def test_two_ranks_merge_to_the_single_process_result(llama_judge):
    questions = [QUESTION, "What is a stake pool?", "Why is there a deposit?", "Can I undelegate?"]
    answers = [ANSWER, "A server that runs a node.", "It pays for the ledger entry.", "Yes, any time."]
    premises = [PREMISE] * 4
    single, rank0, rank1 = (AutoAIS(llama_judge) for _ in range(3))
    single.update(questions, answers, premises)
    rank0.update(questions[:1], answers[:1], premises[:1])
    rank1.update(questions[1:], answers[1:], premises[1:])
    rank1.merge_state(rank0)
    for key, value in single.compute().items():
        torch.testing.assert_close(rank1.compute()[key], value)
    for key, rows in single.per_row().items():
        torch.testing.assert_close(rank1.per_row()[key], rows)


def test_build_judge_reads_sources_like_the_model_spec(tmp_path):
    folder = build_tiny_random(ModelSpec(source=TINY_RANDOM, cache_dir=str(tmp_path)))
    judge = build_judge(AutoAISSettings(model=str(folder), device="cpu"))
    assert isinstance(judge, CausalLMJudge)
    assert (
        judge.max_input_tokens == AutoModelForCausalLM.from_pretrained(folder).config.max_position_embeddings
    )


JUDGED = {"autoais": 1.0, "autoais_soft": 0.9, "autoais_over_limit": 0.0}
OVER_LIMIT = {"autoais": math.nan, "autoais_soft": math.nan, "autoais_over_limit": 1.0}
CHECKED = {"minicheck": 1.0, "minicheck_prob": 0.8, "minicheck_truncated": 0.0}


@pytest.mark.parametrize(
    ("scores", "contradictions"),
    [
        (JUDGED, ("not judged", "not attributable")),
        (OVER_LIMIT, ("attributable",)),
        (CHECKED, ("not", "cut")),
    ],
)
def test_graphctx_answer_reads_every_flag_without_contradicting_itself(scores, contradictions):
    """`graphctx answer` prints each score through its metric's ``describe``: the over-limit flag of a
    judged row used to read "not attributable to the context" under "attributable to the context"."""
    extra = [{"class_path": "minicheck", "init_args": {"model": "lytang/MiniCheck-Flan-T5-Large"}}]
    context = MetricContext(MetricSettings(extra=extra), KnowledgeSettings(), ModelSpec())
    entries = {entry.name: entry for entry in metric_entries(context)}
    lines = [entries[key.partition("_")[0]].describe(key, value) for key, value in scores.items()]
    assert not [line for line in lines for word in contradictions if word in line], lines
    if scores is OVER_LIMIT:
        assert all("not judged" in line for line in lines), lines
