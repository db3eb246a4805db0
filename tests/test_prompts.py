"""Prompts of the variant matrix: the paper's rows, training-identical fine-tuned prompts, context cutting."""

from __future__ import annotations

import pytest

from graphctx.data.instruct import IGNORE_INDEX, TEMPLATES, encode_example
from graphctx.knowledge.budget import KNOWLEDGE_HEADER, QAPair
from graphctx.knowledge.triplets import Triplet
from graphctx.knowledge.verbalise import verbalise
from graphctx.prompts import VARIANTS, build_prompt, encode_prompt, get_variants, variant_context

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
    baselines = {name for name, v in VARIANTS.items() if v.baseline}
    assert baselines == {"ZeroShot", "Base-TextGen", "FineTuned", "TextGen"}
    assert [v.name for v in get_variants(["GraphGen", "ZeroShot"])] == ["ZeroShot", "GraphGen"]
    with pytest.raises(ValueError, match="choose from"):
        get_variants(["GraphRAG"])


def test_contexts_show_what_each_variant_adds():
    pairs_only = variant_context(VARIANTS["GraphGen"], PAIRS, SENTENCES)
    enhanced = variant_context(VARIANTS["GraphContextGen"], PAIRS, SENTENCES)
    only_kg = variant_context(VARIANTS["OnlyContextGen-Graph"], PAIRS, SENTENCES)
    assert pairs_only == (
        "Question: How do I build cardano-node?\n"
        "Answer: Install GHC and cabal, then run `cabal build cardano-node`.\n\n"
        "Question: What is a stake pool?\nAnswer: A node that produces blocks on behalf of delegators."
    )
    assert enhanced == f"{pairs_only}\n\n{KNOWLEDGE_HEADER}\ncardano-node is written in Haskell."
    assert only_kg == f"{KNOWLEDGE_HEADER}\ncardano-node is written in Haskell."
    assert variant_context(VARIANTS["FineTuned"], PAIRS, SENTENCES) == ""
    assert variant_context(VARIANTS["OnlyContextGen-Text"], PAIRS, []) == ""


def test_base_prompts_are_plain_few_shot_text():
    zero = build_prompt(VARIANTS["ZeroShot"], QUESTION, "")
    assert zero.text == f"Question: {QUESTION}\nAnswer:"
    context = variant_context(VARIANTS["Base-GraphGen"], PAIRS, [])
    few_shot = build_prompt(VARIANTS["Base-GraphGen"], QUESTION, context)
    assert few_shot.text == f"{context}\n\nQuestion: {QUESTION}\nAnswer:"
    assert "[INST]" not in few_shot.text


@pytest.mark.parametrize("variant", ["FineTuned", "GraphContextGen", "OnlyContextGen-Text"])
def test_fine_tuned_prompts_are_the_training_prompt_token_for_token(llama_tokenizer, variant):
    """What the adapter sees at evaluation is exactly the prompt part of a training example."""
    context = variant_context(VARIANTS[variant], PAIRS, SENTENCES)
    example = encode_example(
        llama_tokenizer,
        TEMPLATES["paper"],
        QUESTION,
        "Use cardano-cli.",
        max_length=2048,
        context=context or None,
    )
    training_prompt = [
        t for t, label in zip(example["input_ids"], example["labels"], strict=True) if label == IGNORE_INDEX
    ]
    ids, cut = encode_prompt(llama_tokenizer, build_prompt(VARIANTS[variant], QUESTION, context), 2048)
    assert ids == training_prompt
    assert not cut


def test_long_context_is_cut_from_the_left_and_the_question_kept(llama_tokenizer):
    long_context = "\n\n".join(
        f"Question: old question {i}\nAnswer: an old answer with words" for i in range(200)
    )
    prompt = build_prompt(VARIANTS["GraphGen"], QUESTION, long_context)
    full, cut = encode_prompt(llama_tokenizer, prompt, 10_000)
    assert not cut
    ids, cut = encode_prompt(llama_tokenizer, prompt, 128)
    assert cut and len(ids) == 128
    assert ids[:3] == full[:3]  # BOS (when the tokenizer adds one) and the template prefix stay
    text = llama_tokenizer.decode(ids, skip_special_tokens=True)
    assert text.startswith("[INST]") and QUESTION in text and text.endswith("[\\INST]Answer:")
    assert "old question 199" in text and "old question 0\n" not in text  # the oldest (leftmost) part went
    question_and_cue = [
        *llama_tokenizer(prompt.question, add_special_tokens=False)["input_ids"],
        *llama_tokenizer(prompt.cue, add_special_tokens=False)["input_ids"],
    ]
    assert ids[-len(question_and_cue) :] == question_and_cue  # the question is whole
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        encode_prompt(llama_tokenizer, prompt, 4)
