"""The model stack of a config: which model each stage runs, which of them are the paper's, which a
command needs and which cannot be found here, resolved without loading any weights
(:class:`ModelStack`; rendered by :mod:`graphctx.stack.report`)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from graphctx.errors import ConfigError
from graphctx.knowledge.backends import knowledge_sources
from graphctx.knowledge.extractors import selected_extractors
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics.registry import MetricEntry
from graphctx.model_use import ModelUse, model_use, spacy_available
from graphctx.paper import (
    EMBEDDING,
    GENERATION,
    PAPER_EXTRACTORS,
    REBEL,
    WIKIDATA_ENDPOINT,
    Reference,
    how_to_get,
)
from graphctx.pipeline.run_config import RunConfig
from graphctx.prompts import VARIANTS, Variant, get_variants
from graphctx.stack.memory import MemoryEstimate

GENQA = Reference("GenQA generator", ("the authors' GenQA model (not public)",), ())


class ModelStack:
    """The resolved models of one config, stage by stage (see the module docstring)."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        spec = config.model.spec
        knowledge: KnowledgeSettings = config.knowledge
        self.generation = model_use("model.spec.source", spec.source, GENERATION, spec.revision)
        self.embedder = model_use("retrieval.embedding_model", config.retrieval.embedding_model, EMBEDDING)
        self.extractors = selected_extractors(knowledge)
        """The triplet extractors of ``knowledge.extractors`` (:mod:`graphctx.knowledge.extractors`)."""
        self.extractor_models = {
            entry.name: self.generation
            if entry.shares_generation_model
            else model_use(model.key, model.source, model.reference)
            for entry in self.extractors
            if (model := entry.model()) is not None
        }
        """Each extractor's model by its name (the generation model itself where it shares it)."""
        self.metrics = config.metric_entries
        """Every metric the config scores with (:mod:`graphctx.metrics.registry`), in scoring order."""
        adapter = config.adapter_dir  # train.py exports it; the fine-tuned variants answer with it
        found = "folder" if (adapter / "adapter_config.json").is_file() else "missing"
        self.adapter = ModelUse("evaluation.adapter", str(adapter), "adapter", "trained", True, found, None)
        genqa = config.genqa_dir  # always a folder (graphctx genqa writes it), never a Hub id
        found = "folder" if (genqa / "config.json").is_file() else "missing"
        self.genqa = ModelUse(
            "evaluation.genqa_model", str(genqa), GENQA.stage, GENQA.name, False, found, None
        )

    @cached_property
    def memory(self) -> dict[str, Any]:
        """GiB per rank of training and of each evaluation stage (:class:`MemoryEstimate`)."""
        return MemoryEstimate(self.config).to_json()

    @property
    def metric_names(self) -> list[str]:
        return [entry.name for entry in self.metrics]

    # ---- what runs ----------------------------------------------------------------------------------
    @property
    def extractors_are_papers(self) -> bool:
        """REBEL ∪ the answering LLM, both the paper's models."""
        names = set(self.config.knowledge.extractors)
        models = self.extractor_models.values()
        return names == set(PAPER_EXTRACTORS) and all(use.is_paper for use in models)

    @property
    def plan_metrics(self) -> list[MetricEntry]:
        """The metrics in the plan's order (:attr:`MetricEntry.plan_rank`)."""
        return sorted(self.metrics, key=lambda entry: entry.plan_rank)

    def metric_uses(self, names: Sequence[str], with_context: bool = True) -> list[ModelUse]:
        """The models the metrics ``names`` load (the triplet fact score's extractors are the knowledge
        stage's, :meth:`extractor_uses`); a metric judging the context only ``with_context``."""
        uses = []
        for entry in self.metrics:
            if entry.name not in names or (entry.premise and not with_context):
                continue
            uses += entry.models() + (self.extractor_uses() if entry.needs_extractor() else [])
        return uses

    def extensions(self) -> list[dict[str, str]]:
        """What runs beyond the paper's method (not a stand-in: an addition to it): mention linking, every
        metric that is not one of the paper's, and every plug-in retriever and knowledge source."""
        knowledge = self.config.knowledge
        found = [
            {"key": f"evaluation.metrics.{entry.name}", "what": entry.description()}
            for entry in self.metrics
            if not entry.paper_metric
        ]
        plugins = (
            [
                ("retrieval", entry)
                for entry in self.config.retriever_entries.values()
                if hasattr(entry, "class_path")
            ]
            + [
                ("knowledge", source)
                for source in knowledge_sources(knowledge).values()
                if hasattr(source, "class_path")
            ]
            + [("knowledge.extractors", entry) for entry in self.extractors if hasattr(entry, "class_path")]
        )
        found += [
            {"key": f"{section}.{entry.name}", "what": f"{entry.class_path} (a plug-in, beyond the paper)"}
            for section, entry in plugins
        ]
        if knowledge.also:
            also = " + ".join(knowledge.also)
            what = f"KG facts also from {also}, each naming its source (the paper: Wikidata alone)"
            found.append({"key": "knowledge.also", "what": what})
        if self.config.generation.citations:
            what = "ALCE prompts: the passages numbered, [n] asked after each sentence (the paper cites none)"
            found.append({"key": "generation.citations", "what": what})
        if not (knowledge.enabled and knowledge.link_mentions):
            return found
        linking = {
            "key": "knowledge.link_mentions",
            "what": "Ent(C) also gets the KG labels found verbatim in C (software and package names); "
            "the paper's Ent(C) is the heads and tails of the extracted triplets only",
        }
        return [linking, *found]

    def extractor_uses(self) -> list[ModelUse]:
        """The models of the triplet extractors, in ``knowledge.extractors`` order."""
        return list(self.extractor_models.values())

    def stand_ins(self) -> list[dict[str, Any]]:
        """Every stage that runs something other than the paper's model."""
        return [*self._model_stand_ins(), *self._knowledge_stand_ins()]

    def _model_stand_ins(self) -> list[dict[str, Any]]:
        """Stand-ins for the answering model, the embedder and each metric's scorer (in plan order)."""
        found = [
            {"stage": use.stage, "key": use.key, "configured": use.source, "paper": use.paper}
            for use in (self.generation, self.embedder)
            if not use.is_paper
        ]
        return found + [item for entry in self.plan_metrics if (item := entry.stand_in()) is not None]

    def _knowledge_stand_ins(self) -> list[dict[str, Any]]:
        """Stand-ins for the triplet extractors and the knowledge graph."""
        knowledge = self.config.knowledge
        found = []
        if not self.extractors_are_papers:
            found.append(
                {
                    "stage": "triplet extractors (knowledge)",
                    "key": "knowledge.extractors",
                    "configured": "+".join(knowledge.extractors),
                    "paper": f"rebel ({REBEL.name}) + llm (the answering Llama-2)",
                }
            )
        if knowledge.backend != "wikidata" or knowledge.sparql_endpoint != WIKIDATA_ENDPOINT:
            configured = knowledge.backend if knowledge.backend != "wikidata" else knowledge.sparql_endpoint
            found.append(
                {
                    "stage": "knowledge graph",
                    "key": "knowledge.backend",
                    "configured": configured,
                    "paper": f"wikidata ({WIKIDATA_ENDPOINT})",
                }
            )
        return found

    def needed(self, variants: Sequence[Variant], metrics: Sequence[str]) -> list[ModelUse]:
        """The models that answering ``variants`` and scoring ``metrics`` load, in load order."""
        uses = [self.generation]
        retrievers = self.config.retriever_entries
        if any(v.retrieval != "none" and retrievers[v.retrieval].embeds for v in variants):
            uses.append(self.embedder)
        if any(v.knowledge for v in variants):
            uses += self.extractor_uses()
        uses += self.metric_uses(metrics, with_context=any(v.has_context for v in variants))
        if any(v.name == "GenQA" for v in variants):
            uses.append(self.genqa)
        return list(dict.fromkeys(uses))

    def needed_by(
        self, command: str, variants: Sequence[Variant] | None = None, metrics: Sequence[str] | None = None
    ) -> list[ModelUse]:
        """The models of ``train`` (the model, and what the validation callback computes), ``evaluate``
        (``variants``, default ``evaluation.variants``, and ``metrics``, default every metric), ``answer``
        (``variants`` and the AutoAIS judgement, or the judges of ``metrics``), ``serve`` (``variants``,
        and the judge of ``evaluation.attribution``) or ``enhance`` (retrieval and knowledge)."""
        settings = self.config.evaluation
        if command == "train":
            if settings.callback_every_n_validations <= 0:
                return [self.generation]
            return self.needed([VARIANTS[settings.callback_variant]], settings.callback_metrics)
        if command in ("answer", "serve"):  # the answers (a fine-tuned variant's adapter too), and the judge:
            # answer's AutoAIS judgement; serve's only when evaluation.attribution attributes each answer
            adapter = [self.adapter] if any(v.model == "adapter" for v in variants or []) else []
            judging = command == "answer" or bool(settings.attribution)
            judges = [entry.name for entry in self.metrics if entry.premise] if judging else []
            if metrics is not None and command == "answer":
                judges = list(metrics)
            return self.needed(variants or [], judges) + adapter
        if command == "enhance":  # retrieval and knowledge, budgets in the generation model's tokens
            return self.needed([VARIANTS["GraphContextGen"]], [])
        scored = self.metric_names if metrics is None else metrics
        return self.needed(variants or get_variants(settings.variants), scored)

    def configured_uses(self) -> list[ModelUse]:
        """Every configured model that some run of this config loads (GenQA's only when asked for)."""
        return list(
            dict.fromkeys(
                [
                    self.generation,
                    self.embedder,
                    *self.extractor_uses(),
                    *self.metric_uses(self.metric_names),
                ]
            )
        )

    def missing(self, uses: list[ModelUse] | None = None) -> list[dict[str, str]]:
        """The models of ``uses`` (default: :meth:`configured_uses`) that cannot be found here, with hints;
        then the spaCy pipelines the config loads that are not installed."""
        uses = uses if uses is not None else self.configured_uses()
        found = [
            {"key": use.key, "model": use.source, "hint": how_to_get(use.key, use.source)}
            for use in uses
            if use.available == "missing"
        ]
        for item in found:
            if item["key"] == self.adapter.key:
                item["hint"] = (
                    f"evaluation.adapter: no trained adapter in {item['model']} (adapter_config.json "
                    "missing); train one with `python train.py --config CONFIG`, point evaluation.adapter "
                    "at one, or answer with a base variant (--variant ZeroShot)"
                )
            if item["key"] == self.genqa.key:
                item["hint"] = (
                    f"evaluation.genqa_model: no trained GenQA model in {item['model']}; train one with "
                    "`graphctx genqa --config CONFIG` (or point evaluation.genqa_model at one)"
                )
        return found + self._missing_pipelines()

    def _missing_pipelines(self) -> list[dict[str, str]]:
        """The spaCy pipelines this config loads that are neither installed nor a folder."""
        knowledge = self.config.knowledge
        pipelines = [pipeline for entry in self.metrics for pipeline in entry.pipelines()]
        pipelines += [pipeline for entry in self.extractors for pipeline in entry.pipelines()]
        if knowledge.enabled and knowledge.link_mentions:  # mention linking: its English-word list
            pipelines.append(("knowledge.spacy_model", knowledge.spacy_model))
        pipelines = list(dict.fromkeys(pipelines))
        return [
            {
                "key": key,
                "model": name,
                "hint": f"{key}: spaCy pipeline {name!r} is not installed (pip install "
                "it, or name a pipeline folder)",
            }
            for key, name in pipelines
            if spacy_available(name) == "missing"
        ]


def check_models(
    stack: ModelStack,
    command: str,
    variants: Sequence[Variant] | None = None,
    metrics: Sequence[str] | None = None,
) -> None:
    """Fail, naming the key and how to get it, when a model ``command`` needs (see
    :meth:`ModelStack.needed_by`) cannot be found."""
    missing = stack.missing(stack.needed_by(command, variants, metrics))
    if missing:
        raise ConfigError("; ".join(item["hint"] for item in missing))
