"""The triplet type and the extractor interface shared by REBEL, the LLM and spaCy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from graphctx.knowledge.settings import KnowledgeSettings


@dataclass(frozen=True, order=True)
class Triplet:
    """One fact (head, relation, tail) and where it came from.

    ``source`` names the producer for attribution: an extractor (``"rebel"``, ``"llm"``, ``"spacy"``,
    optionally with ``"@pair=<i>"`` for the retrieved pair it was read from) or a knowledge graph
    (``"kg:local"``, ``"kg:wikidata"``).
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


def build_extractor(settings: KnowledgeSettings) -> TripletExtractor:
    """The extractor named by ``settings.extractor`` with its model loaded."""
    if settings.extractor == "spacy":
        from graphctx.knowledge.spacy_extractor import SpacyExtractor
        from graphctx.knowledge.store import load_gazetteer

        return SpacyExtractor.load(settings.spacy_model, load_gazetteer(settings))
    if settings.extractor == "rebel":
        from graphctx.knowledge.rebel import RebelExtractor

        return RebelExtractor.from_pretrained(settings)
    if settings.extractor == "llm":
        from graphctx.knowledge.llm import LLMExtractor

        return LLMExtractor.from_pretrained(settings)
    raise ValueError(f"knowledge.extractor: unknown extractor {settings.extractor!r} (spacy | rebel | llm)")
