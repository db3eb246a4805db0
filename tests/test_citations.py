"""Sentence citations as ALCE asks for and parses them. The expected strings are what the authors' code
(princeton-nlp/ALCE, commit 246c476) gives for the same inputs: the prompt from ``utils.make_demo`` with
``prompts/asqa_default.json`` (``test=True``, no demonstrations); the sentences from ``eval.py``'s
first-line cut, ``nltk.sent_tokenize`` (NLTK 3.9, English ``punkt_tab``), ``re.findall(r"\\[\\d+", sent)``
and ``utils.remove_citations(sent).strip()``, run on each answer below."""

from __future__ import annotations

from graphctx.citations import CitedSentence, parse_citations
from graphctx.data.instruct import TEMPLATES, with_context
from graphctx.knowledge.budget import QAPair
from graphctx.knowledge.triplets import Triplet
from graphctx.knowledge.verbalise import verbalise
from graphctx.prompts import VARIANTS, build_prompt

QUESTION = "How do I register a stake pool certificate with cardano-cli?"
PAIRS = [
    QAPair("How do I build cardano-node?", "Install GHC and cabal, then run `cabal build cardano-node`.", 11),
    QAPair("What is a stake pool?", "A node that produces blocks on behalf of delegators.", 12),
]
SENTENCES = verbalise([Triplet("cardano-node", "is written in", "Haskell", "kg:local")])
INSTRUCTION = (
    "Instruction: Write an accurate, engaging, and concise answer for the given question using only "
    "the provided search results (some of which might be irrelevant) and cite them properly. Use an "
    "unbiased and journalistic tone. Always cite for any factual claim. When citing several search "
    "results, use [1][2][3]. Cite at least one document and at most three documents in each sentence. "
    "If multiple documents support the sentence, only cite a minimum sufficient subset of the documents."
)
DOCUMENTS = (
    "Document [1](Title: How do I build cardano-node?): Install GHC and cabal, then run "
    "`cabal build cardano-node`.\n"
    "Document [2](Title: What is a stake pool?): A node that produces blocks on behalf of delegators.\n"
    "Document [3](Title: cardano-node): cardano-node is written in Haskell."
)
# make_demo(item, demo_prompt, ndoc=3, doc_prompt, instruction, test=True) for the question and the three
# documents above (titles: the pairs' questions and the triplet's head)
THEIR_PROMPT = f"{INSTRUCTION}\n\nQuestion: {QUESTION}\n\n{DOCUMENTS}\n\nAnswer:"

# answer -> [(remove_citations(sentence).strip(), marks)] from ALCE's own functions
THEIRS = {
    "Cardano uses Ouroboros [1]. Delegation keeps your ADA liquid [2][3]. It has no mark here.": [
        ("Cardano uses Ouroboros.", [1]),
        ("Delegation keeps your ADA liquid.", [2, 3]),
        ("It has no mark here.", []),
    ],
    "Dr. Smith runs pool No. 5 in the U.S. [1]. It pays e.g. 5 ADA [2, 3].": [
        ("Dr. Smith runs pool No.", []),
        ("5 in the U.S..", [1]),
        ("It pays e.g.", []),
        ("5 ADA, 3.", [2]),
    ],
    "Stake pools earn rewards.[1] Fees are 340 ADA [10] per epoch [4].": [
        ("Stake pools earn rewards.", []),
        ("Fees are 340 ADA per epoch.", [1, 10, 4]),
    ],
    "Use the wallet [1 | 2] or the CLI |[3]] to sign.": [("Use the wallet 2 or the CLI to sign.", [1, 3])],
    "": [],
    "No citations at all. None.": [("No citations at all.", []), ("None.", [])],
}


def test_sentences_marks_and_texts_are_alces():
    for answer, expected in THEIRS.items():
        theirs = [CitedSentence(text, tuple(marks)) for text, marks in expected]
        assert parse_citations(answer) == theirs, answer


def test_each_line_is_split_as_alce_splits_its_one_line():
    first, second = "Cardano uses Ouroboros [1]. It has no mark here.", "Fees are 340 ADA [10] per epoch [4]."
    assert parse_citations(f"  {first}\n\n{second}\n") == parse_citations(first) + parse_citations(second)


def test_a_base_prompt_with_citations_is_alces_prompt():
    prompt = build_prompt(VARIANTS["Base-GraphContextGen"], QUESTION, PAIRS, SENTENCES, citations=True)
    assert prompt.text == THEIR_PROMPT
    assert prompt.context == DOCUMENTS
    assert [p.judged for p in prompt.passages] == [
        "Title: How do I build cardano-node?\nInstall GHC and cabal, then run `cabal build cardano-node`.",
        "Title: What is a stake pool?\nA node that produces blocks on behalf of delegators.",
        "Title: cardano-node\ncardano-node is written in Haskell.",
    ]


def test_a_fine_tuned_prompt_with_citations_has_the_instruction_and_documents_as_its_context():
    prompt = build_prompt(VARIANTS["GraphContextGen"], QUESTION, PAIRS, SENTENCES, citations=True)
    assert prompt.text == TEMPLATES["paper"].prompt(with_context(QUESTION, f"{INSTRUCTION}\n\n{DOCUMENTS}"))
    # dropped parts renumber: the fitted prompt's passages are 1..n
    fitted = prompt.without(2)
    assert (
        fitted.context
        == "Document [1](Title: How do I build cardano-node?): Install GHC and cabal, then run "
        "`cabal build cardano-node`."
    )


def test_prompts_without_a_context_or_with_citations_off_are_unchanged():
    for name in ("ZeroShot", "FineTuned", "GraphContextGen", "Base-GraphContextGen"):
        plain = build_prompt(VARIANTS[name], QUESTION, PAIRS, SENTENCES)
        assert not plain.citations
        cited = build_prompt(VARIANTS[name], QUESTION, PAIRS, SENTENCES, citations=True)
        assert (cited.text == plain.text) == (not VARIANTS[name].has_context), name


def test_the_option_is_in_the_answers_fingerprint_only_when_on(tmp_path):
    from tiny_config import TINY

    from graphctx.evaluation.matrix.resume_guard import ResumeGuard
    from graphctx.pipeline.config_file import load_config

    def generation(*overrides: str) -> dict:
        config = load_config(TINY, ["--cache_dir", str(tmp_path), *overrides])
        return ResumeGuard(config, None, None).prediction_fingerprint(VARIANTS["Base-TextGen"])["generation"]

    off = generation()
    assert "citations" not in off  # runs made before the option existed resume
    assert generation("--generation.citations", "true") == {**off, "citations": True}
