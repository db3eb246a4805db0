"""The triplet type, the extractor interface shared by REBEL, the LLM and spaCy, and their union.

The extractors themselves build on these; :mod:`graphctx.knowledge.extractors` picks and loads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True, order=True)
class Triplet:
    """One fact (head, relation, tail) and where it came from.

    ``source`` names the producer for attribution: an extractor (``"rebel"``, ``"llm"``, ``"spacy"``, or
    ``"rebel+llm"`` when several extractors of a union found it; optionally with ``"@pair=<i>"`` for the
    retrieved pair it was read from) or a knowledge graph (``"kg:local"``, ``"kg:wikidata"``).
    """

    head: str
    relation: str
    tail: str
    source: str = ""


@runtime_checkable
class TripletExtractor(Protocol):
    """Texts in, one list of triplets per text out (batched inside)."""

    name: str

    def extract(self, texts: Sequence[str]) -> list[list[Triplet]]: ...


class ExtractorUnion:
    """Several extractors over the same texts, their triplets united text by text.

    Per text: the first extractor's triplets in its order, then each next extractor's new ones. A
    (head, relation, tail) found by several extractors appears once, at its first place, and its ``source``
    joins their names in extractor order with ``+`` (``"rebel+llm"``).
    """

    def __init__(self, extractors: Sequence[TripletExtractor]) -> None:
        self.extractors = list(extractors)
        self.name = "+".join(e.name for e in self.extractors)

    def extract(self, texts: Sequence[str]) -> list[list[Triplet]]:
        """One de-duplicated list of triplets per text (see the class docstring)."""
        results = []
        for found in zip(*(e.extract(texts) for e in self.extractors), strict=True):
            sources: dict[tuple[str, str, str], list[str]] = {}
            for triplets in found:
                for t in triplets:
                    names = sources.setdefault((t.head, t.relation, t.tail), [])
                    if t.source not in names:
                        names.append(t.source)
            results.append([Triplet(*fact, "+".join(names)) for fact, names in sources.items()])
        return results
