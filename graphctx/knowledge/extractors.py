"""Pick and load the triplet extractors a config names (REBEL, the LLM, spaCy) and unite them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.triplets import ExtractorUnion, TripletExtractor

if TYPE_CHECKING:
    from graphctx.knowledge.kg import Gazetteer
    from graphctx.knowledge.llm import GenerationModel


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
            from graphctx.knowledge.backends import build_gazetteer
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
