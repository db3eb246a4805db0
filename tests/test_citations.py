"""Sentence citations parsed as ALCE parses them. The expected sentences and marks are what the authors'
code (princeton-nlp/ALCE, commit 246c476) gives for the same answers: ``eval.py``'s first-line cut,
``nltk.sent_tokenize`` (NLTK 3.9, English ``punkt_tab``), ``re.findall(r"\\[\\d+", sent)`` and
``utils.remove_citations(sent).strip()``, run on each answer below."""

from __future__ import annotations

from graphctx.citations import CitedSentence, parse_citations

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
