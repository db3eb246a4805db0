"""What a baseline answers from: the retrieved past questions with their accepted answers, votes and tags."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graphctx.errors import ConfigError
from graphctx.knowledge.budget import QAPair


@dataclass(frozen=True)
class Candidate:
    """One retrieved pool question and its accepted answer, best retrieved first."""

    question: str
    answer: str
    votes: int = 0
    """The answer's score on the site (``answer_score``)."""
    tags: tuple[str, ...] = field(default=())
    """The question's Stack Exchange tags."""


def candidates_for(
    variant: str, pairs: Sequence[QAPair], pool: Mapping[int, Mapping[str, Any]]
) -> list[Candidate]:
    """The candidates of one query: its retrieved ``pairs`` with their pool rows' votes and tags.

    Raises ``ConfigError`` naming ``variant`` when nothing was retrieved (an empty retrieval pool)."""
    if not pairs:
        raise ConfigError(
            f"{variant}: no retrieved answers to work from (the retrieval pool, the training split, is empty)"
        )
    out = []
    for pair in pairs:
        row = pool.get(pair.id, {}) if pair.id is not None else {}
        votes = int(row.get("answer_score") or 0)
        out.append(Candidate(pair.question, pair.answer, votes, tuple(row.get("tags") or ())))
    return out
