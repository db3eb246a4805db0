"""Where each statement of an enhanced context came from, as plain records for the prediction lines.

An enhanced context (:mod:`graphctx.knowledge.enhance`) keeps τ^init, the triplets the extractors read
from the retrieved pairs (``source``: ``"spacy@pair=0"``, ``"rebel+llm@pair=2"``), and τ', the KG facts
kept by the one-hop filter, each with its backend (``"kg:local"``) and the sentence that states it. A
statement is *in the context* when its sentence (case-insensitively, as :func:`verbalise` de-duplicates)
is among the sentences S shown (those that survived the token budgets).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from graphctx.knowledge.sparql import KGFact
from graphctx.knowledge.triplets import Triplet
from graphctx.knowledge.verbalise import Sentence, fact_to_triplet, verbalise

PAIR_TAG = "@pair="
"""What :mod:`graphctx.knowledge.enhance` appends to an extracted triplet's source: the pair's rank."""


@dataclass(frozen=True)
class SourcedFact:
    """One fact of τ': the KG edge (ids and labels), the backend that gave it, the sentence stating it."""

    fact: KGFact
    source: str
    sentence: str


def sourced_facts(facts: Iterable[tuple[str, KGFact]]) -> list[SourcedFact]:
    """Each distinct ``(source, fact)`` once, in order, with its sentence (``verbalise`` of its
    triplet)."""
    return [
        SourcedFact(fact, source, verbalise([fact_to_triplet(fact, source)])[0].text)
        for source, fact in dict.fromkeys(facts)
    ]


def split_source(source: str) -> tuple[list[str], int | None]:
    """An extracted triplet's source as (extractor names, pair rank): ``"rebel+llm@pair=2"`` →
    (``["rebel", "llm"]``, 2); no ``@pair=`` tag → rank None."""
    names, tag, rank = source.partition(PAIR_TAG)
    return names.split("+"), int(rank) if tag else None


def _stated(sentences: Sequence[Sentence]) -> set[str]:
    return {s.text.lower() for s in sentences}


def triplet_records(extracted: Sequence[Triplet], kept: Sequence[Sentence]) -> list[dict[str, Any]]:
    """τ^init as records: head, relation, tail, the extractors that found it, the pair it was read from,
    and whether its sentence is in the context."""
    stated = _stated(kept)
    records = []
    for triplet in extracted:
        extractors, pair = split_source(triplet.source)
        records.append(
            {
                "head": triplet.head,
                "relation": triplet.relation,
                "tail": triplet.tail,
                "extractors": extractors,
                "pair": pair,
                "in_context": verbalise([triplet])[0].text.lower() in stated,
            }
        )
    return records


def fact_records(facts: Sequence[SourcedFact], kept: Sequence[Sentence]) -> list[dict[str, Any]]:
    """τ' as records: the backend, the edge's ids and labels, its sentence, and whether that sentence is
    in the context."""
    stated = _stated(kept)
    return [
        {
            "source": f.source,
            **asdict(f.fact),
            "sentence": f.sentence,
            "in_context": f.sentence.lower() in stated,
        }
        for f in facts
    ]
