"""The entity Jaccard as a registry entry: entity sets of answer and gold by UniversalNER (the paper's:
its authors' prompt and parsing) or by a spaCy pipeline's NER (labelled ``[spacy:…]``)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from graphctx.metrics.choice import ScorerChoice, choose_entity_scorer
from graphctx.metrics.entries.facts_section import SCORING, FactsSectionEntry
from graphctx.metrics.entry_defaults import ByteCounter, library_versions
from graphctx.metrics.registry import GoldScored, RowScorer, device_of, stand_in_tag
from graphctx.metrics.settings import ENTITY_TYPES_NOTE
from graphctx.model_use import ModelUse, model_identity, model_use, spacy_available
from graphctx.paper import UNINER

METHOD_FIELDS: dict[str, tuple[str, ...]] = {
    "uniner": ("entity_method", "uniner_model", "entity_types", "max_new_tokens"),
    "spacy": ("entity_method", "spacy_model"),
}
"""The fields of the shared ``facts`` section each entity method reads."""
UNINER_PAPER = f"UniversalNER ({UNINER.name})"
SPACY_KEY = "evaluation.metrics.facts.spacy_model"
SPACY_ENTITIES = (
    "graphctx's choices: the prose only (fenced code removed), value types (numbers, ordinals, dates, "
    "times, money, quantities, percentages) dropped, matched as UniversalNER's evaluation (SQuAD-normalised)"
)
"""What the spaCy entity Jaccard's description (results.md's model lines) says of its entity sets."""


class EntityJaccardEntry(FactsSectionEntry):
    """|E(answer) ∩ E(gold)| / |E(answer) ∪ E(gold)| of the entity sets."""

    name = "entity_jaccard"
    columns: ClassVar[dict[str, str]] = {"entity_jaccard": "Entity Jaccard"}
    column_rank = 50
    plan_rank = 50
    title = "Entity Jaccard"
    method_fields = METHOD_FIELDS

    def choose(self) -> ScorerChoice:
        return choose_entity_scorer(self.settings.facts)

    @cached_property
    def use(self) -> ModelUse:
        return model_use("evaluation.metrics.facts.uniner_model", self.settings.facts.uniner_model, UNINER)

    def fingerprint(self) -> dict[str, Any]:
        facts = self.settings.facts
        if self.method == "uniner":
            return {
                "model": model_identity(facts.uniner_model),
                "libraries": library_versions(("torch", "transformers")),
            }
        name = facts.spacy_model
        model = model_identity(name) if Path(name).exists() else library_versions((name,))[name]
        return {"model": {name: model}, "libraries": library_versions(("spacy",)), "scoring": SCORING}

    def models(self) -> list[ModelUse]:
        return [self.use] if self.method == "uniner" else []

    def pipelines(self) -> list[tuple[str, str]]:
        return [(SPACY_KEY, self.settings.facts.spacy_model)] if self.method == "spacy" else []

    def stand_in(self) -> dict[str, Any] | None:
        if self.choice.paper:
            return None
        return {
            "stage": "entity Jaccard",
            "key": self.stand_in_key(),
            "configured": self.label,
            "paper": UNINER_PAPER,
        }

    def stand_in_key(self) -> str:
        return "evaluation.metrics.facts.entity_method"

    def plan_json(self) -> dict[str, Any]:
        entity, facts = self.choice, self.settings.facts
        common = {"method": entity.method, "model": entity.model, "paper": entity.paper}
        if entity.method == "spacy":
            return {**common, "available": spacy_available(facts.spacy_model), "label": entity.label}
        return {
            **common,
            "available": self.use.available,
            "provenance": self.use.provenance,
            "entity_types": list(facts.entity_types),
            "entity_types_note": ENTITY_TYPES_NOTE,
            "max_new_tokens": facts.max_new_tokens,
            "device": device_of(facts.device),
            "label": entity.label,
        }

    def plan_lines(self) -> list[str]:
        lines = [f"  entities     {self.choice.method}: {self.choice.model}"]
        if self.method == "uniner":
            types = ", ".join(self.settings.facts.entity_types)
            lines.append(f"               entity types: {types} ({ENTITY_TYPES_NOTE})")
        return lines

    def description(self) -> str:
        entity, facts = self.choice, self.settings.facts
        text = (
            f"UniversalNER {entity.model} (entity types {', '.join(facts.entity_types)}: {ENTITY_TYPES_NOTE})"
            if entity.method == "uniner"
            else f"spaCy {entity.model} NER ({SPACY_ENTITIES})"
        )
        return text + stand_in_tag(entity.label)

    def memory_bytes(self, counter: ByteCounter) -> float | None:
        """UniversalNER: bf16 weights, the prefill and the KV cache of a batch of prompts; spaCy: the CPU."""
        facts = self.settings.facts
        if self.method != "uniner":
            return 0.0
        return counter.decoding_bytes(facts.uniner_model, facts.max_new_tokens, facts.batch_size)

    def scorer(self, device, cache_dir, extractor, gold_store) -> RowScorer:
        from graphctx.metrics.facts import EntityJaccard, SpacyEntities

        facts = self.settings.facts
        if self.method == "uniner":
            from graphctx.metrics.uniner import UniNEREntities

            finder = UniNEREntities(facts, device, self.context.backend)
        else:
            finder = SpacyEntities.load(facts.spacy_model)
        return GoldScored(lambda: EntityJaccard(finder, label=self.label, sync_on_compute=False), gold_store)
