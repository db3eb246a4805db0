"""The fact score as a registry entry: FactSumm's (release 0.1.5, its NER + LUKE relation models; the
paper's) or the knowledge stage's triplet extractors with stemmed matching (labelled ``[triplets:…]``)."""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Any, ClassVar

from graphctx.knowledge.extractors import selected_extractors, uses_generation_model
from graphctx.metrics.choice import ScorerChoice, choose_fact_scorer
from graphctx.metrics.entries.facts_section import SCORING, FactsSectionEntry
from graphctx.metrics.entry_defaults import ByteCounter
from graphctx.metrics.registry import GoldScored, RowScorer, device_of, stand_in_tag
from graphctx.model_use import ModelUse, model_identity, model_use
from graphctx.paper import FACTSUMM_NER, FACTSUMM_RELATION, FACTSUMM_VERSION

METHOD_FIELDS: dict[str, tuple[str, ...]] = {
    "factsumm": ("fact_method", "ner_model", "relation_model"),
    "triplets": ("fact_method", "comparable_only"),
}
"""The fields of the shared ``facts`` section each fact method reads."""
METHOD_LIBRARIES = {"factsumm": ("pysbd", "torch", "transformers"), "triplets": ("nltk",)}
EXTRACTOR_FIELDS = ("extractors", "spacy_model")
EXTRACTOR_PREFIXES = ("rebel_", "llm_")
TRIPLET_MATCHING = (
    "graphctx's matching: NFKC, lower case, punctuation and articles dropped, auxiliaries lemmatised, "
    "Porter-stemmed, then FactSumm's exact match after its (head, relation) filter; 0 when no fact compares"
)
"""What the triplet fact score's description (results.md's model lines) says of its matching."""
FACTSUMM_PAPER = f"FactSumm {FACTSUMM_VERSION} ({FACTSUMM_NER.name} + {FACTSUMM_RELATION.name})"


class FactScoreEntry(FactsSectionEntry):
    """Share of an answer's facts found among its gold answer's (FactSumm's formula)."""

    name = "fact_score"
    columns: ClassVar[dict[str, str]] = {"fact_score": "Fact score"}
    column_rank = 30
    plan_rank = 40
    title = "Fact score"
    method_fields = METHOD_FIELDS
    paper_columns: ClassVar[dict[str, tuple[str, str]]] = {"fact_score": ("factsumm", "FactSumm")}

    def choose(self) -> ScorerChoice:
        return choose_fact_scorer(self.settings.facts, self.context.knowledge.extractors)

    @cached_property
    def uses(self) -> list[ModelUse]:
        """FactSumm's NER and relation models."""
        facts = self.settings.facts
        return [
            model_use("evaluation.metrics.facts.ner_model", facts.ner_model, FACTSUMM_NER),
            model_use("evaluation.metrics.facts.relation_model", facts.relation_model, FACTSUMM_RELATION),
        ]

    def fingerprint(self) -> dict[str, Any]:
        facts = self.settings.facts
        libraries = {"libraries": self._libraries()}
        if self.method == "factsumm":
            models = {
                "ner": model_identity(facts.ner_model),
                "relation": model_identity(facts.relation_model),
            }
            return {"models": models, **libraries, "label": self.label}
        return {"extractor": self._extractor(), **libraries, "label": self.label, "scoring": SCORING}

    def _libraries(self) -> dict[str, str | None]:
        from graphctx.metrics.entry_defaults import library_versions

        return library_versions(METHOD_LIBRARIES[self.method])

    def _extractor(self) -> dict[str, Any]:
        """The knowledge stage's extractor settings and models (and the generation model when the LLM
        extractor is that model): the triplet fact score runs them, FactSumm never reads them."""
        knowledge, generation = self.context.knowledge, self.context.generation
        parts = {
            k: v
            for k, v in dataclasses.asdict(knowledge).items()
            if k in EXTRACTOR_FIELDS or k.startswith(EXTRACTOR_PREFIXES)
        }
        plugins = {}
        for entry in selected_extractors(knowledge):
            model = entry.model()
            if model is not None:
                parts[f"{entry.name}_identity"] = model_identity(model.source or None)
            if entry.fingerprint():
                plugins[entry.name] = entry.fingerprint()
        if plugins:
            parts["plugins"] = plugins
        if uses_generation_model(knowledge):
            parts["generation_model"] = dataclasses.asdict(generation)
            parts["generation_identity"] = model_identity(generation.source)
        return parts

    def models(self) -> list[ModelUse]:
        return self.uses if self.method == "factsumm" else []

    def needs_extractor(self) -> bool:
        return self.method == "triplets"

    def stand_in(self) -> dict[str, Any] | None:
        if self.choice.paper:
            return None
        key = self.stand_in_key()
        return {"stage": "fact score", "key": key, "configured": self.label, "paper": FACTSUMM_PAPER}

    def stand_in_key(self) -> str:
        return "evaluation.metrics.facts.fact_method"

    def plan_json(self) -> dict[str, Any]:
        fact, facts = self.choice, self.settings.facts
        common = {"method": fact.method, "model": fact.model, "paper": fact.paper}
        if fact.method == "triplets":
            extractors = list(self.context.knowledge.extractors)
            return {**common, "extractors": extractors, "comparable_only": facts.comparable_only} | {
                "label": fact.label
            }
        ner, relation = self.uses
        return {
            **common,
            "release": f"FactSumm {FACTSUMM_VERSION}",
            "ner_model": ner.to_json(),
            "relation_model": relation.to_json(),
            "device": device_of(facts.device),
            "label": fact.label,
        }

    def plan_lines(self) -> list[str]:
        return [f"  fact score   {self.choice.method}: {self.choice.model}"]

    def description(self) -> str:
        text = (
            f"FactSumm {FACTSUMM_VERSION} ({self.choice.model})"
            if self.method == "factsumm"
            else f"triplets by {' + '.join(self.context.knowledge.extractors)} ({TRIPLET_MATCHING})"
        )
        return text + stand_in_tag(self.label)

    def memory_bytes(self, counter: ByteCounter) -> float | None:
        """FactSumm: its NER and relation models in float32; the triplet score: the knowledge extractors."""
        if self.method != "factsumm":
            return counter.extractor_bytes()
        facts = self.settings.facts
        parts = [counter.weight_bytes(facts.ner_model, 4), counter.weight_bytes(facts.relation_model, 4)]
        return None if any(part is None for part in parts) else float(sum(parts))  # type: ignore[arg-type]

    def callback_bytes(self, counter: ByteCounter, on_cuda: bool) -> list[float | None]:
        """The extractors' own weights (REBEL's) on the knowledge device, whatever the callback's device."""
        entries = selected_extractors(self.context.knowledge)
        return [part for entry in entries for part in entry.own_weight_bytes(counter)]

    def scorer(self, device, cache_dir, extractor, gold_store) -> RowScorer:
        if self.method == "factsumm":
            from graphctx.metrics.factsumm import FactSummExtractor, FactSummScore

            factsumm = FactSummExtractor(self.settings.facts, device)
            return GoldScored(
                lambda: FactSummScore(factsumm, label=self.label, sync_on_compute=False), gold_store
            )
        from graphctx.metrics.facts import FactScore

        if extractor is None:
            raise ValueError("the triplet fact score needs a triplet extractor")
        facts = self.settings.facts
        return GoldScored(
            lambda: FactScore(extractor, facts, label=self.label, sync_on_compute=False), gold_store
        )
