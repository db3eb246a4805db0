"""Prompts of the variant matrix: the paper's rows, training-identical prompts, fitting to the limit."""

from __future__ import annotations

import dataclasses

import pytest

from graphctx.data.instruct import IGNORE_INDEX, TEMPLATES, encode_example, prompt_ids, with_context
from graphctx.evaluation_settings import TEXT_TWINS
from graphctx.knowledge.budget import KNOWLEDGE_HEADER, QAPair
from graphctx.knowledge.triplets import Triplet
from graphctx.knowledge.verbalise import verbalise
from graphctx.prompts import VARIANTS, EncodedPrompt, build_prompt, encode_prompt, get_variants

QUESTION = "How do I register a stake pool certificate with cardano-cli?"
PAIRS = [
    QAPair("How do I build cardano-node?", "Install GHC and cabal, then run `cabal build cardano-node`.", 11),
    QAPair("What is a stake pool?", "A node that produces blocks on behalf of delegators.", 12),
]
SENTENCES = verbalise([Triplet("cardano-node", "is written in", "Haskell", "kg:local")])


def test_matrix_has_the_papers_rows():
    rows = {name: (v.model, v.retrieval, v.knowledge, v.pairs) for name, v in VARIANTS.items()}
    assert rows == {
        "ZeroShot": ("base", "none", False, False),
        "Base-TextGen": ("base", "dense", False, True),
        "Base-TextContextGen": ("base", "dense", True, True),
        "Base-GraphGen": ("base", "graph", False, True),
        "Base-GraphContextGen": ("base", "graph", True, True),
        "FineTuned": ("adapter", "none", False, False),
        "TextGen": ("adapter", "dense", False, True),
        "TextContextGen": ("adapter", "dense", True, True),
        "GraphGen": ("adapter", "graph", False, True),
        "GraphContextGen": ("adapter", "graph", True, True),
        "OnlyContextGen-Text": ("adapter", "dense", True, False),
        "OnlyContextGen-Graph": ("adapter", "graph", True, False),
    }
    # the default comparisons: every graph variant against the same prompt with cosine retrieval
    graph_variants = {name for name, v in VARIANTS.items() if v.retrieval == "graph"}
    assert set(TEXT_TWINS) == graph_variants
    for graph, text in TEXT_TWINS.items():
        assert (
            dataclasses.replace(VARIANTS[graph], name=text, label=VARIANTS[text].label, retrieval="dense")
            == (VARIANTS[text])
        )
    assert [v.name for v in get_variants(["GraphGen", "ZeroShot"])] == ["ZeroShot", "GraphGen"]
    with pytest.raises(ValueError, match="choose from"):
        get_variants(["GraphRAG"])


def test_contexts_show_what_each_variant_adds():
    def context(name: str) -> str:
        return build_prompt(VARIANTS[name], QUESTION, PAIRS, SENTENCES).context

    pairs_only = context("GraphGen")
    assert pairs_only == (
        "Question: How do I build cardano-node?\n"
        "Answer: Install GHC and cabal, then run `cabal build cardano-node`.\n\n"
        "Question: What is a stake pool?\nAnswer: A node that produces blocks on behalf of delegators."
    )
    assert (
        context("GraphContextGen")
        == f"{pairs_only}\n\n{KNOWLEDGE_HEADER}\ncardano-node is written in Haskell."
    )
    assert context("OnlyContextGen-Graph") == f"{KNOWLEDGE_HEADER}\ncardano-node is written in Haskell."
    assert context("FineTuned") == ""
    assert build_prompt(VARIANTS["OnlyContextGen-Text"], QUESTION, PAIRS, []).context == ""


def test_base_prompts_are_plain_few_shot_text():
    zero = build_prompt(VARIANTS["ZeroShot"], QUESTION)
    assert zero.text == f"Question: {QUESTION}\nAnswer:"
    few_shot = build_prompt(VARIANTS["Base-GraphGen"], QUESTION, PAIRS, SENTENCES)
    assert few_shot.text == f"{few_shot.context}\n\nQuestion: {QUESTION}\nAnswer:"
    assert "[INST]" not in few_shot.text


def training_prompt(tokenizer, template: str, question: str, context: str) -> list[int]:
    """The prompt ids (labels -100) of a training example with ``context`` placed as ``with_context`` does."""
    example = encode_example(
        tokenizer, TEMPLATES[template], with_context(question, context), "Use cardano-cli.", 100_000
    )
    return [
        t for t, label in zip(example["input_ids"], example["labels"], strict=True) if label == IGNORE_INDEX
    ]


@pytest.mark.parametrize("variant", ["FineTuned", "GraphContextGen", "OnlyContextGen-Text"])
def test_fine_tuned_prompts_are_the_training_prompt_token_for_token(llama_tokenizer, variant):
    """What the adapter sees at evaluation is exactly the prompt part of a training example."""
    prompt = build_prompt(VARIANTS[variant], QUESTION, PAIRS, SENTENCES)
    encoded = encode_prompt(llama_tokenizer, prompt, 2048)
    assert encoded.ids == training_prompt(llama_tokenizer, "paper", QUESTION, prompt.context)
    assert not encoded.truncated and not encoded.over_limit and encoded.prompt == prompt


@pytest.mark.parametrize("template", ["paper", "llama2-chat"])
@pytest.mark.parametrize("tokenizer_name", ["llama_tokenizer", "smollm2_tokenizer"])
def test_inference_prompts_of_real_questions_are_the_training_prompts(
    request, cardano_rows, template, tokenizer_name
):
    """The fine-tuned model's prompt for every cardano question is the training prompt, token for token;
    it reads ``[INST]q[\\INST]Answer:`` (llama2-chat: ``[INST] q [/INST]``, the trailing space being part
    of the answer's first token, as Llama-2-chat was trained)."""
    tokenizer = request.getfixturevalue(tokenizer_name)
    expected = {"paper": "[INST]{}[\\INST]Answer:", "llama2-chat": "[INST] {} [/INST]"}[template]
    for row in cardano_rows:
        prompt = build_prompt(VARIANTS["FineTuned"], row["question"], template=template)
        ids = encode_prompt(tokenizer, prompt, 100_000).ids
        assert ids == training_prompt(tokenizer, template, row["question"], "")
        assert tokenizer.decode(ids, skip_special_tokens=True) == expected.format(row["question"])


def pairs_and_sentences(rows: list[dict]) -> tuple[list[QAPair], list]:
    """Four real pairs (best first) and six KG sentences about them."""
    pairs = [QAPair(row["question"][:300], row["answer"][:300], int(row["id"])) for row in rows[:4]]
    sentences = verbalise(
        [Triplet(f"cardano-node {i}", "is written in", "Haskell", "kg:local") for i in range(6)]
    )
    return pairs, sentences


@pytest.mark.parametrize("variant", ["GraphContextGen", "Base-GraphContextGen"])
def test_over_limit_prompts_lose_knowledge_sentences_then_the_lowest_pairs(
    llama_tokenizer, cardano_rows, variant
):
    """Over ``max_prompt_tokens`` a prompt loses whole parts in the budget's order: sentences from the end,
    then pairs from the lowest rank; the question and the top pair are never cut, and the ids stay those of
    training with the context that is left."""
    pairs, sentences = pairs_and_sentences(cardano_rows)
    question = cardano_rows[10]["question"]
    prompt = build_prompt(VARIANTS[variant], question, pairs, sentences)

    def length(dropped: int) -> int:
        return len(prompt_ids(llama_tokenizer, prompt.without(dropped).text))

    def fitted(limit: int) -> EncodedPrompt:
        encoded = encode_prompt(llama_tokenizer, prompt, limit)
        assert encoded.ids == prompt_ids(llama_tokenizer, encoded.prompt.text)
        if VARIANTS[variant].model == "adapter":
            assert encoded.ids == training_prompt(llama_tokenizer, "paper", question, encoded.prompt.context)
        assert encoded.prompt.question == question and encoded.prompt.pairs[0] == pairs[0]
        return encoded

    whole = fitted(length(0))
    assert whole.prompt == prompt and not whole.truncated and not whole.over_limit
    one_sentence = fitted(length(0) - 1)
    assert one_sentence.prompt.sentences == tuple(sentences[:-1]) and one_sentence.prompt.pairs == tuple(
        pairs
    )
    assert one_sentence.truncated and not one_sentence.over_limit and len(one_sentence.ids) <= length(0) - 1
    lowest_pair = fitted(length(len(sentences)) - 1)
    assert lowest_pair.prompt.sentences == () and lowest_pair.prompt.pairs == tuple(pairs[:3])
    assert lowest_pair.truncated and not lowest_pair.over_limit
    top_only = fitted(length(prompt.droppable))
    assert (
        top_only.prompt.pairs == (pairs[0],) and top_only.prompt.sentences == () and not top_only.over_limit
    )
    over = fitted(16)  # not even the question fits: question and top pair kept whole, over the limit
    assert over.prompt == top_only.prompt and over.ids == top_only.ids and over.truncated and over.over_limit
    text = llama_tokenizer.decode(over.ids, skip_special_tokens=True)
    assert question.strip() in text and pairs[0].text() in text


def test_a_question_alone_over_the_limit_is_kept_whole_and_flagged(llama_tokenizer):
    prompt = build_prompt(VARIANTS["ZeroShot"], QUESTION)
    encoded = encode_prompt(llama_tokenizer, prompt, 4)
    assert encoded.ids == prompt_ids(llama_tokenizer, prompt.text) and len(encoded.ids) > 4
    assert encoded.over_limit and not encoded.truncated and encoded.prompt == prompt
