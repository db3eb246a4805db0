"""Triplets → sentences ("head relation tail."), with readable names for common Wikidata properties."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from graphctx.knowledge.sparql import KGFact, local_name
from graphctx.knowledge.triplets import Triplet

READABLE_RELATIONS = {
    "P31": "is a",
    "P279": "is a kind of",
    "P306": "runs on",
    "P400": "runs on",
    "P277": "is written in",
    "P361": "is part of",
    "P527": "has part",
    "P1547": "depends on",
    "P178": "is developed by",
    "P275": "is licensed under",
    "P144": "is based on",
    "P366": "is used for",
    "P1535": "is used by",
    "P408": "uses",
    "P2283": "uses",
    "P176": "is made by",
    "P127": "is owned by",
    "plugin-of": "is a plugin of",
    "debian-section": "is in the Debian section",
}
"""Relation id (last IRI segment) → verb phrase; other relations keep their KG label."""


def readable_relation(relation_id: str, label: str) -> str:
    """A verb phrase for a KG relation: ``wdt:P306`` → ``runs on``; unknown ones keep their label."""
    return READABLE_RELATIONS.get(local_name(relation_id), label)


def fact_to_triplet(fact: KGFact, source: str) -> Triplet:
    """A KG fact as a triplet with a readable relation, attributed to ``source`` (e.g. ``kg:local``)."""
    return Triplet(
        fact.head_label, readable_relation(fact.relation_id, fact.relation_label), fact.tail_label, source
    )


@dataclass(frozen=True)
class Sentence:
    """One sentence of S and the triplet it states (whose ``source`` gives the extractor or KG)."""

    text: str
    triplet: Triplet

    @property
    def source(self) -> str:
        return self.triplet.source


def verbalise(triplets: Iterable[Triplet]) -> list[Sentence]:
    """One sentence "head relation tail." per triplet, in order, case-insensitive duplicates dropped."""
    sentences: list[Sentence] = []
    seen: set[str] = set()
    for triplet in triplets:
        relation = triplet.relation
        if relation.endswith(" a") and triplet.tail[:1].lower() in set("aeiou"):
            relation += "n"  # "is a application" -> "is an application"
        text = " ".join(f"{triplet.head} {relation} {triplet.tail}".split()).rstrip(".") + "."
        if text.lower() not in seen:
            seen.add(text.lower())
            sentences.append(Sentence(text, triplet))
    return sentences
