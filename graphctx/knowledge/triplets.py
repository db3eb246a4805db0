"""The triplet type, the extractor interface shared by REBEL, the LLM and spaCy, and their union."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from graphctx.knowledge.settings import KnowledgeSettings

if TYPE_CHECKING:
    from graphctx.knowledge.kg import Gazetteer
    from graphctx.knowledge.llm import GenerationModel


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


def build_extractor(
    settings: KnowledgeSettings,
    generation_model: GenerationModel | None = None,
    gazetteer: Gazetteer | None = None,
) -> TripletExtractor:
    """The union of ``settings.extractors`` with their models loaded (a single one is returned as is).

    ``generation_model``: the loaded generation model, which the ``llm`` extractor uses when
    ``settings.llm_model`` is ``""`` (see :attr:`KnowledgeSettings.uses_generation_model`).
    ``gazetteer``: KG labels for the ``spacy`` extractor (default: :func:`build_gazetteer` of ``settings``).
    """
    extractors: list[TripletExtractor] = []
    for name in settings.extractors:
        if name == "spacy":
            from graphctx.knowledge.kg import build_gazetteer
            from graphctx.knowledge.spacy_extractor import SpacyExtractor

            gazetteer = gazetteer if gazetteer is not None else build_gazetteer(settings)
            extractors.append(
                SpacyExtractor.load(settings.spacy_model, gazetteer.maps, gazetteer.matcher_resolve())
            )
        elif name == "rebel":
            from graphctx.knowledge.rebel import RebelExtractor

            extractors.append(RebelExtractor.from_pretrained(settings))
        else:  # "llm": KnowledgeSettings accepts no other name
            from graphctx.knowledge.llm import LLMExtractor

            extractors.append(LLMExtractor.from_settings(settings, generation_model))
    return extractors[0] if len(extractors) == 1 else ExtractorUnion(extractors)
