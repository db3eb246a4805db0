"""ALCE's citation recall and precision (Gao et al., 2023): is each answer sentence entailed by the passages
it cites, and is each cited passage needed?

Built from the authors' ``eval.py`` (github.com/princeton-nlp/ALCE, commit ``246c476``), ``compute_autoais``
with ``at_most_citations=3`` (their command line's default). Per answer, its sentences and marks as
:func:`graphctx.citations.parse_citations` reads them, passage n being the n-th numbered passage of the
prompt as the judge reads it (``Title: …\\n…``); entailment is the AutoAIS judge's hard decision:

- a sentence without marks, or with a mark naming a passage that is not there (any of its marks, before
  the cut to three), is not supported, and its marks count in no precision;
- else its first ``at_most`` marks R are its citations: it is supported when the passages of R joined by
  ``\\n`` (repeats kept) entail its text;
- recall = supported sentences / sentences;
- precision = kept citations / citations, over the sentences with citations (0 when there are none). A
  supported sentence's single citation is kept; each of several is kept unless its passage alone does not
  entail the text while the others of R without it (its first occurrence removed) do; an unsupported
  sentence's citations are all counted and none kept.

An answer without sentences is left out of the means (NaN), as their loop skips it; the table's mean over
answers is theirs over 100. A row whose judge input is over the judge's limit is never cut: it scores NaN
and 1 in ``citation_over_limit``, as AutoAIS does. ``citation_out_of_range`` counts a row's sentences with
a mark naming a missing passage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graphctx.citations import CitedSentence

Judgements = Callable[[Sequence[tuple[str, str]]], list[bool]]
"""``[(premise, hypothesis), …] → [entailed, …]``: one batch of the judge's hard decisions."""
Fits = Callable[[Sequence[tuple[str, str]]], list[bool]]
"""``[(premise, hypothesis), …] → [within the judge's input limit, …]``."""


@dataclass(frozen=True)
class CitationScore:
    """One answer's scores (NaN when it has no sentence or an input over the judge's limit)."""

    recall: float
    precision: float
    out_of_range: int
    over_limit: bool = False


@dataclass
class _Claim:
    """One sentence under judgement: its text, its citations R (passage numbers) and the row it is in."""

    row: int
    text: str
    cited: tuple[int, ...]
    supported: bool = False
    kept: int = 0


def _citations(sentence: CitedSentence, passages: int, at_most: int) -> tuple[int, ...]:
    """The sentence's citations R: its first ``at_most`` marks; none when it has none or names a missing
    passage (any of its marks)."""
    if any(not 1 <= mark <= passages for mark in sentence.marks):
        return ()
    return sentence.marks[:at_most]


def _joined(passages: Sequence[str], numbers: Sequence[int]) -> str:
    return "\n".join(passages[number - 1] for number in numbers)


def _without_first(numbers: tuple[int, ...], number: int) -> tuple[int, ...]:
    position = numbers.index(number)
    return numbers[:position] + numbers[position + 1 :]


class _Rounds:
    """The judge called in rounds over a batch of rows (joint, alone, leave-one-out), each distinct input
    judged once; a row with an input over the judge's limit is over the limit, and its inputs go unjudged."""

    def __init__(self, judge: Judgements, fits: Fits) -> None:
        self.judge, self.fits = judge, fits
        self.decided: dict[tuple[str, str], bool] = {}
        self.too_long: set[tuple[str, str]] = set()
        self.over_limit: set[int] = set()

    def __call__(self, asked: Sequence[tuple[int, str, str]]) -> list[bool | None]:
        """Per ``(row, premise, hypothesis)``: entailed, or None for a row over the limit."""
        pairs = dict.fromkeys((p, h) for _, p, h in asked)
        new = [pair for pair in pairs if pair not in self.decided and pair not in self.too_long]
        if new:
            self.too_long.update(pair for pair, fits in zip(new, self.fits(new), strict=True) if not fits)
        self.over_limit.update(row for row, p, h in asked if (p, h) in self.too_long)
        wanted = {(p, h) for row, p, h in asked if row not in self.over_limit}
        judged = [pair for pair in new if pair in wanted]
        if judged:
            self.decided.update(zip(judged, self.judge(judged), strict=True))
        return [None if row in self.over_limit else self.decided[(p, h)] for row, p, h in asked]


def citation_scores(
    answers: Sequence[Sequence[CitedSentence]],
    passages: Sequence[Sequence[str]],
    judge: Judgements,
    fits: Fits | None = None,
    at_most: int = 3,
) -> list[CitationScore]:
    """Each answer's citation recall and precision (module docstring), ``answers[i]`` citing
    ``passages[i]`` (passage n at position n - 1); ``fits`` says which judge inputs the judge accepts
    (default: all)."""
    rounds = _Rounds(judge, fits or (lambda pairs: [True] * len(pairs)))
    claims = [
        _Claim(row, sentence.text, _citations(sentence, len(passages[row]), at_most))
        for row, sentences in enumerate(answers)
        for sentence in sentences
    ]
    cited = [claim for claim in claims if claim.cited]
    joint = rounds([(c.row, _joined(passages[c.row], c.cited), c.text) for c in cited])
    for claim, entailed in zip(cited, joint, strict=True):
        claim.supported = bool(entailed)
        claim.kept = int(bool(entailed) and len(claim.cited) == 1)

    several = [(c, number) for c in cited if c.supported and len(c.cited) > 1 for number in c.cited]
    alone = rounds([(c.row, passages[c.row][n - 1], c.text) for c, n in several])
    needed_alone = [(c, n) for (c, n), entailed in zip(several, alone, strict=True) if entailed is False]
    for (claim, _), entailed in zip(several, alone, strict=True):
        claim.kept += bool(entailed)
    rest = rounds(
        [(c.row, _joined(passages[c.row], _without_first(c.cited, n)), c.text) for c, n in needed_alone]
    )
    for (claim, _), entailed in zip(needed_alone, rest, strict=True):
        claim.kept += entailed is False

    scores = []
    for row, sentences in enumerate(answers):
        mine = [claim for claim in claims if claim.row == row]
        out_of_range = sum(bool(s.marks) and not c.cited for s, c in zip(sentences, mine, strict=True))
        if not mine or row in rounds.over_limit:
            nan = float("nan")
            scores.append(CitationScore(nan, nan, out_of_range, over_limit=row in rounds.over_limit))
            continue
        total = sum(len(claim.cited) for claim in mine)
        recall = sum(claim.supported for claim in mine) / len(mine)
        scores.append(
            CitationScore(recall, sum(c.kept for c in mine) / total if total else 0.0, out_of_range)
        )
    return scores
