"""Control pairs that show whether a judge metric can tell supported claims from unsupported ones.

Construction (deterministic for a seed): the evaluated rows are shuffled with ``numpy.random.default_rng
(seed)``; walking that order, each row whose gold answer has a sentence of at least :data:`MIN_WORDS` words
(spaCy's rule-based sentencizer, as AutoAIS's sentence mode splits) gives one sentence, drawn uniformly from
those, until :data:`CONTROL_PAIRS` rows are taken. Each taken sentence is judged twice, as the row's answer
to its own question:

- supported: premise = its own gold answer (the sentence is part of it);
- unsupported, three kinds (:data:`KINDS`):

  - ``other_question``: premise = the gold answer of the next taken row (cyclically) whose gold answer does
    not contain the sentence: another question's passage, of the same kind and length distribution, so a
    judge cannot tell the two sets apart by the premise's length or genre alone. Easy: the topic differs.
  - ``neighbour``: premise = the accepted answer of the row's nearest pool question (TF-IDF cosine of the
    question texts, the pool's questions and answers as given; graphctx's choice, cheaper than loading the
    retriever's encoder) whose answer does not contain the sentence: same topic, other facts.
  - ``swapped_fact``: premise = the row's own gold answer with one fact of the sentence (a number or
    version, a command or flag, a package or program name, a code span; :func:`fact_tokens`) replaced, at
    every place it stands, by another fact of the same kind drawn from the pool's answers: the same text
    but for the one fact the claim states. Rows whose sentence states no such fact have no pair of this
    kind.

The judge's score s (its soft score where it has one, else its accept value) gives
AUC = P(s_supported > s_unsupported) + ½·P(=) over all cross pairs (Mann–Whitney U / (n₊·n₋), ties counted
half), and its accept value a ∈ {0, 1} (or a fraction) gives the accept rates ā₊, ā₋, per kind of
unsupported pair. A judge has **no signal** when, on the ``other_question`` kind, AUC < :data:`MIN_AUC` or
ā₊ − ā₋ < :data:`MIN_ACCEPT_GAP`; a judge with signal there that fails the same test on a hard kind is
**topic only** (it tells topics apart, not facts):

- AUC 0.5 is chance; with 50 pairs a side the AUC's null standard error is √((n₊+n₋+1)/(12·n₊·n₋)) ≈ 0.058,
  so 0.6 is about 1.7 standard errors above chance — a weak bar that any usable judge clears easily (on
  identical-text supported pairs a real NLI judge is near 1).
- The table shows the accept value's mean: if supported and unsupported pairs differ by less than 0.1 in
  it, the column cannot separate variants that differ in attribution by less than that either, whatever
  the soft score ranks. A judge that accepts everything (accept rates 1 and 1) fails this test.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CONTROL_PAIRS = 50
"""Most sentences taken (each judged once supported, once unsupported)."""
MIN_WORDS = 5
"""Fewest whitespace-separated words of a control sentence (shorter ones, "Thanks!", claim nothing)."""
MIN_AUC = 0.6
"""A judge whose AUC on the control pairs is below this has no signal."""
MIN_ACCEPT_GAP = 0.1
"""A judge whose supported accept rate exceeds the unsupported one by less than this has no signal."""
MIN_SIDE = 2
"""Fewest judged pairs on each side for a verdict (fewer: "not measured")."""
KINDS = ("other_question", "neighbour", "swapped_fact")
"""The kinds of unsupported pair (module docstring); the first is the easy one."""
HARD_KINDS = KINDS[1:]

FACT_PATTERNS: dict[str, re.Pattern[str]] = {
    "code": re.compile(r"`[^`\n]{2,60}`"),
    "flag": re.compile(r"(?<![\w-])--?[a-zA-Z][\w-]*"),
    "version": re.compile(r"(?<![\w.])\d+(?:\.\d+)+(?![\w.])"),
    "number": re.compile(r"(?<![\w.])\d+(?![\w.])"),
    "name": re.compile(r"(?<![\w-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w-])"),
}
"""The facts a claim can state that ``swapped_fact`` swaps, by kind: a code span, a command-line flag, a
version, a whole number, a hyphenated program or package name (``cardano-cli``)."""


@dataclass(frozen=True)
class ControlPairs:
    """The control pairs: per taken sentence, its question, the sentence, and both premises."""

    row_ids: list[int]
    questions: list[str]
    sentences: list[str]
    supported: list[str]
    """Each sentence's own gold answer."""
    unsupported: list[str]
    """``other_question``: another taken row's gold answer, not containing the sentence."""
    neighbour: list[str | None]
    """``neighbour``: the nearest pool question's answer not containing the sentence (None: no pool)."""
    swapped: list[str | None]
    """``swapped_fact``: the own gold answer with one of the sentence's facts swapped (None: it states
    none, or the pool has no other fact of its kind)."""

    def premises(self, kind: str) -> list[str | None]:
        """The unsupported premises of one kind (:data:`KINDS`)."""
        return {
            "other_question": self.unsupported,
            "neighbour": self.neighbour,
            "swapped_fact": self.swapped,
        }[kind]

    def as_json(self) -> dict[str, list]:
        return {
            "row_ids": self.row_ids,
            "questions": self.questions,
            "sentences": self.sentences,
            "supported": self.supported,
            "unsupported": self.unsupported,
            "neighbour": self.neighbour,
            "swapped_fact": self.swapped,
        }


def _sentencizer():
    """spaCy's rule-based sentencizer (AutoAIS sentence mode's split)."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def fact_tokens(text: str) -> list[tuple[str, str]]:
    """The facts stated in ``text`` as (kind, token), in :data:`FACT_PATTERNS` order, each once; a token
    inside a longer one already taken (a number inside a version or a code span) is not taken again."""
    found: list[tuple[str, str]] = []
    spans: list[tuple[int, int]] = []
    for kind, pattern in FACT_PATTERNS.items():
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(a <= start and end <= b for a, b in spans):
                continue
            spans.append((start, end))
            if (kind, match.group()) not in found:
                found.append((kind, match.group()))
    return found


def swap_fact(
    sentence: str, premise: str, pool_facts: dict[str, list[str]], rng: np.random.Generator
) -> str | None:
    """``premise`` with one fact of ``sentence`` (drawn with ``rng``) replaced at every place it stands by
    another fact of its kind from ``pool_facts``; None when the sentence states no fact the pool can swap."""
    candidates = [
        (kind, token)
        for kind, token in fact_tokens(sentence)
        if token in premise and any(other != token for other in pool_facts.get(kind, []))
    ]
    if not candidates:
        return None
    kind, token = candidates[int(rng.integers(len(candidates)))]
    others = [other for other in pool_facts[kind] if other != token]
    replacement = others[int(rng.integers(len(others)))]
    pattern = FACT_PATTERNS[kind] if kind != "code" else re.compile(re.escape(token))
    swapped = pattern.sub(lambda m: replacement if m.group() == token else m.group(), premise)
    return swapped if sentence not in swapped else None


def pool_fact_table(answers: Sequence[str]) -> dict[str, list[str]]:
    """Every fact of the pool's answers by kind, sorted (the swap's draw is then seeded and stable)."""
    table: dict[str, set[str]] = {}
    for answer in answers:
        for kind, token in fact_tokens(answer):
            table.setdefault(kind, set()).add(token)
    return {kind: sorted(tokens) for kind, tokens in table.items()}


def nearest_pool_answers(
    questions: Sequence[str], pool_questions: Sequence[str], pool_answers: Sequence[str]
) -> list[list[str]]:
    """Per question, the pool's answers ordered by TF-IDF cosine of their questions to it, nearest first
    (ties by pool order)."""
    if not pool_questions or not questions:
        return [[] for _ in questions]
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer().fit(list(pool_questions))
    similarity = (
        vectorizer.transform(list(questions)) @ vectorizer.transform(list(pool_questions)).T
    ).toarray()
    order = np.argsort(-similarity, axis=1, kind="stable")
    return [[pool_answers[j] for j in row] for row in order]


def control_pairs(
    row_ids: Sequence[int],
    questions: Sequence[str],
    golds: Sequence[str],
    seed: int,
    n: int = CONTROL_PAIRS,
    pool_questions: Sequence[str] = (),
    pool_answers: Sequence[str] = (),
) -> ControlPairs:
    """The control pairs of the evaluated rows (module docstring); empty when fewer than two rows qualify.
    ``pool_questions`` / ``pool_answers``: the retrieval pool, for the ``neighbour`` and ``swapped_fact``
    kinds (without a pool those premises are None)."""
    rng, nlp = np.random.default_rng(seed), _sentencizer()
    taken: list[tuple[int, str]] = []
    for row in rng.permutation(len(golds)).tolist():
        sentences = (s.text.strip() for s in nlp(golds[row]).sents)
        usable = [s for s in sentences if len(s.split()) >= MIN_WORDS]
        if usable:
            taken.append((row, usable[int(rng.integers(len(usable)))]))
        if len(taken) == n:
            break
    pairs: list[tuple[int, str, str]] = []  # (row, sentence, unsupported premise)
    for k, (row, sentence) in enumerate(taken):
        others = (taken[(k + step) % len(taken)][0] for step in range(1, len(taken)))
        other = next((o for o in others if sentence not in golds[o]), None)
        if other is not None:
            pairs.append((row, sentence, golds[other]))
    if len(pairs) < MIN_SIDE:
        pairs = []
    nearest = nearest_pool_answers([questions[row] for row, _, _ in pairs], pool_questions, pool_answers)
    facts, swap_rng = pool_fact_table(pool_answers), np.random.default_rng([seed, 1])
    neighbour = [
        next((a for a in ranked if sentence not in a), None)
        for ranked, (_, sentence, _) in zip(nearest, pairs, strict=True)
    ]
    swapped = [swap_fact(sentence, golds[row], facts, swap_rng) for row, sentence, _ in pairs]
    return ControlPairs(
        [int(row_ids[row]) for row, _, _ in pairs],
        [questions[row] for row, _, _ in pairs],
        [sentence for _, sentence, _ in pairs],
        [golds[row] for row, _, _ in pairs],
        [premise for _, _, premise in pairs],
        neighbour,
        swapped,
    )


def mann_whitney_auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(x₊ > x₋) + ½·P(x₊ = x₋) over all (positive, negative) pairs; NaN when a side is empty."""
    pos, neg = np.asarray(positive, dtype=float), np.asarray(negative, dtype=float)
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (pos.size * neg.size))


@dataclass(frozen=True)
class JudgeCheck:
    """A judge's verdict on the control pairs."""

    auc: float
    accept_supported: float
    accept_unsupported: float
    n_supported: int
    """Supported pairs judged (pairs over the judge's input limit score NaN and are left out)."""
    n_unsupported: int

    @property
    def measured(self) -> bool:
        return min(self.n_supported, self.n_unsupported) >= MIN_SIDE

    @property
    def signal(self) -> bool:
        """Whether the judge tells the sets apart (module docstring's thresholds)."""
        return (
            self.measured
            and self.auc >= MIN_AUC
            and self.accept_supported - self.accept_unsupported >= MIN_ACCEPT_GAP
        )

    @property
    def verdict(self) -> str:
        return "signal" if self.signal else ("no signal" if self.measured else "not measured")

    def as_json(self) -> dict[str, float | int | str | None]:
        """The verdict with its figures (NaN as null)."""
        figures = {
            "auc": self.auc,
            "accept_supported": self.accept_supported,
            "accept_unsupported": self.accept_unsupported,
        }
        return {
            **{name: None if math.isnan(value) else value for name, value in figures.items()},
            "n_supported": self.n_supported,
            "n_unsupported": self.n_unsupported,
            "verdict": self.verdict,
        }


def check_judge(
    accept_supported: Sequence[float],
    score_supported: Sequence[float],
    accept_unsupported: Sequence[float],
    score_unsupported: Sequence[float],
) -> JudgeCheck:
    """The verdict from each pair's accept value and score (NaN: not judged, left out)."""
    a_pos, s_pos = _judged(accept_supported, score_supported)
    a_neg, s_neg = _judged(accept_unsupported, score_unsupported)
    return JudgeCheck(
        mann_whitney_auc(s_pos, s_neg),
        float(a_pos.mean()) if a_pos.size else float("nan"),
        float(a_neg.mean()) if a_neg.size else float("nan"),
        int(a_pos.size),
        int(a_neg.size),
    )


def _judged(accept: Sequence[float], score: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, s = np.asarray(accept, dtype=float), np.asarray(score, dtype=float)
    keep = ~(np.isnan(a) | np.isnan(s))
    return a[keep], s[keep]
