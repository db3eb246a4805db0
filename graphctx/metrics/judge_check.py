"""Control pairs that show whether a judge metric can tell supported claims from unsupported ones.

Construction (deterministic for a seed): the evaluated rows are shuffled with ``numpy.random.default_rng
(seed)``; walking that order, each row whose gold answer has a sentence of at least :data:`MIN_WORDS` words
(spaCy's rule-based sentencizer, as AutoAIS's sentence mode splits) gives one sentence, drawn uniformly from
those, until :data:`CONTROL_PAIRS` rows are taken. Each taken sentence is judged twice, as the row's answer
to its own question:

- supported: premise = its own gold answer (the sentence is part of it);
- unsupported: premise = the gold answer of the next taken row (cyclically) whose gold answer does not
  contain the sentence: another question's passage, of the same kind and length distribution, so a judge
  cannot tell the two sets apart by the premise's length or genre alone.

The judge's score s (its soft score where it has one, else its accept value) gives
AUC = P(s_supported > s_unsupported) + ½·P(=) over all cross pairs (Mann–Whitney U / (n₊·n₋), ties counted
half), and its accept value a ∈ {0, 1} (or a fraction) gives the accept rates ā₊, ā₋. A judge has **no
signal** when AUC < :data:`MIN_AUC` or ā₊ − ā₋ < :data:`MIN_ACCEPT_GAP`:

- AUC 0.5 is chance; with 50 pairs a side the AUC's null standard error is √((n₊+n₋+1)/(12·n₊·n₋)) ≈ 0.058,
  so 0.6 is about 1.7 standard errors above chance — a weak bar that any usable judge clears easily (on
  identical-text supported pairs a real NLI judge is near 1).
- The table shows the accept value's mean: if supported and unsupported pairs differ by less than 0.1 in
  it, the column cannot separate variants that differ in attribution by less than that either, whatever
  the soft score ranks. A judge that accepts everything (accept rates 1 and 1) fails this test.
"""

from __future__ import annotations

import math
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


@dataclass(frozen=True)
class ControlPairs:
    """The control pairs: per taken sentence, its question, the sentence, and both premises."""

    row_ids: list[int]
    questions: list[str]
    sentences: list[str]
    supported: list[str]
    """Each sentence's own gold answer."""
    unsupported: list[str]
    """Another taken row's gold answer, not containing the sentence."""

    def as_json(self) -> dict[str, list]:
        return {
            "row_ids": self.row_ids,
            "questions": self.questions,
            "sentences": self.sentences,
            "supported": self.supported,
            "unsupported": self.unsupported,
        }


def _sentencizer():
    """spaCy's rule-based sentencizer (AutoAIS sentence mode's split)."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def control_pairs(
    row_ids: Sequence[int],
    questions: Sequence[str],
    golds: Sequence[str],
    seed: int,
    n: int = CONTROL_PAIRS,
) -> ControlPairs:
    """The control pairs of the evaluated rows (module docstring); empty when fewer than two rows qualify."""
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
    return ControlPairs(
        [int(row_ids[row]) for row, _, _ in pairs],
        [questions[row] for row, _, _ in pairs],
        [sentence for _, sentence, _ in pairs],
        [golds[row] for row, _, _ in pairs],
        [premise for _, _, premise in pairs],
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
