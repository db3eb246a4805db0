"""Text units and similarities the extractive baselines share: paragraphs, sentences, TF-IDF cosine, MMR."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`*\"'(])")
_FENCE = re.compile(r"```.*?```", re.DOTALL)


def paragraphs(text: str) -> list[str]:
    """The blank-line separated paragraphs of an answer (a fenced code block stays one paragraph)."""
    blocks: list[str] = []
    position = 0
    for fence in _FENCE.finditer(text):
        blocks += [p for p in re.split(r"\n\s*\n", text[position : fence.start()])]
        blocks.append(fence.group(0))
        position = fence.end()
    blocks += re.split(r"\n\s*\n", text[position:])
    return [block.strip() for block in blocks if block.strip()]


def sentences(text: str) -> list[str]:
    """The sentences of an answer: each paragraph split after ``.``, ``!`` or ``?`` followed by a capital,
    digit or quote; code blocks are left out (a summary sentence is prose)."""
    out = []
    for paragraph in paragraphs(text):
        if paragraph.startswith("```"):
            continue
        out += [s.strip() for s in _SENTENCE_END.split(" ".join(paragraph.split())) if s.strip()]
    return out


TOKENS = r"(?u)\b\w[\w.+#-]*\w\b|\b\w\b"
"""Word tokens of the TF-IDF vectors: a word with inner ``.+#-`` (``node.js``, ``c++``, ``c#``) is one."""


def fit_idf(documents: Sequence[str]):
    """A scikit-learn ``TfidfVectorizer`` (lower case, :data:`TOKENS`, L2 rows) whose vocabulary and
    smoothed IDF, ``idf(t) = ln((1 + n) / (1 + df(t))) + 1``, are fitted on ``documents``."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(lowercase=True, token_pattern=TOKENS).fit(list(documents))


def tfidf(texts: Sequence[str], extra: Sequence[str] = (), vectorizer=None) -> tuple[np.ndarray, np.ndarray]:
    """L2-normalised TF-IDF rows of ``texts`` and of ``extra`` (e.g. the query), by ``vectorizer``
    (:func:`fit_idf`; default: fitted on ``texts``). Words outside its vocabulary are left out."""
    vectorizer = vectorizer or fit_idf(texts)
    matrix = vectorizer.transform(list(texts)).toarray()
    return matrix, vectorizer.transform(list(extra)).toarray() if extra else np.zeros((0, matrix.shape[1]))


def mmr(
    scores: np.ndarray, similarity: np.ndarray, lam: float, lengths: Sequence[int], max_words: int
) -> list[int]:
    """Maximal marginal relevance (Carbonell and Goldstein 1998): repeatedly take the unit maximising
    ``lam * score(u) - (1 - lam) * max_{s in chosen} sim(u, s)`` while the words chosen stay within
    ``max_words`` (the first unit always goes in); returns the chosen positions in choice order."""
    chosen: list[int] = []
    words = 0
    left = list(range(len(scores)))
    while left:

        def gain(u: int) -> float:
            redundancy = max((similarity[u, s] for s in chosen), default=0.0)
            return lam * scores[u] - (1 - lam) * redundancy

        best = max(left, key=lambda u: (gain(u), -u))
        left.remove(best)
        if chosen and words + lengths[best] > max_words:
            continue
        chosen.append(best)
        words += lengths[best]
    return chosen
