"""RetrievedAnswer: the accepted answer of the top retrieved question, verbatim (the copy baseline).

Not in the paper; the floor every generated answer should clear. ``RetrievedAnswer`` takes the top hit of
dense retrieval (cosine top-k, the paper's TextGen retrieval), ``RetrievedAnswer-Graph`` the top hit of
personalized PageRank (its GraphGen retrieval). No model of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from graphctx.baselines.candidates import Candidate

STAND_INS: dict[str, str] = {}
"""None: it uses the configured retriever, as the LLM variants do."""


def answer(question: str, candidates: Sequence[Candidate]) -> str:
    """The top candidate's answer, unchanged."""
    return candidates[0].answer
