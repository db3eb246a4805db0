"""SQuAD's answer normalisation (``normalize_answer`` of the SQuAD v1.1 evaluation script), the form in
which UniversalNER's evaluation (``src/eval/evaluate.py``) matches entities: lower case, punctuation
deleted, articles ``a an the`` removed, whitespace collapsed; no stemming."""

from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalised form of ``text`` (``"The cardano-cli!"`` → ``"cardanocli"``)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())
