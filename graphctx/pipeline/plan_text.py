"""``graphctx plan``'s screen of text (:func:`plan_text`) and the per-stage model lines of results.md
(:func:`model_descriptions`), read from a :class:`~graphctx.pipeline.stack.ModelStack` and its config
with the values :mod:`graphctx.pipeline.plan_report` puts in the JSON."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from graphctx.baselines import substitutions
from graphctx.metrics.settings import ENTITY_TYPES_NOTE
from graphctx.paper import FACTSUMM_VERSION
from graphctx.pipeline.plan_report import (
    budget_unit,
    device_of,
    evaluate_weights,
    kg_source,
    rescaled,
    stop_strings,
    template_name,
)
from graphctx.pipeline.run_config import RunConfig
from graphctx.pipeline.stack import ModelStack
from graphctx.prompts import BASELINE_VARIANTS
from graphctx.retrieval.settings import RetrievalSettings


def plan_text(stack: ModelStack) -> str:
    """One screen: a line per stage, stand-ins marked, then what is missing."""
    stand_ins = stack.stand_ins()
    papers = stand_in_papers(stand_ins)

    def mark(key: str) -> str:
        return f"   STAND-IN (paper: {papers[key]})" if key in papers else ""

    config = stack.config
    fact, entity = stack.fact, stack.entity
    lines = [
        f"graphctx plan: {config.path}",
        generation_line(stack) + mark("model.spec.source"),
        stops_line(config),
        retrieval_line(stack) + mark("retrieval.embedding_model"),
        f"  extractors   {extractors_text(stack)}" + mark("knowledge.extractors"),
        f"  knowledge    {config.knowledge.backend} {kg_source(config.knowledge)}; "
        f"budget {config.knowledge.token_budget} {budget_unit(config)}" + mark("knowledge.backend"),
        bertscore_line(stack) + mark("evaluation.metrics.bertscore"),
        autoais_line(stack) + mark("evaluation.metrics.autoais.model"),
        f"  fact score   {fact.method}: {fact.model}" + mark("evaluation.metrics.facts.fact_method"),
        f"  entities     {entity.method}: {entity.model}" + mark("evaluation.metrics.facts.entity_method"),
        *entity_types_line(stack),
        callback_line(config),
        f"  stand-ins    {len(stand_ins)}"
        + (": " + ", ".join(item["stage"] for item in stand_ins) if stand_ins else ""),
        *baseline_lines(stack),
        memory_line(stack.memory),
        *(f"  extension    {item['key']}: {item['what']}" for item in stack.extensions()),
        *missing_lines(stack.missing()),
    ]
    return "\n".join(lines)


def stand_in_papers(stand_ins: list[dict[str, Any]]) -> dict[str, str]:
    """Setting key → the paper's model, for each of ``stand_ins`` (:meth:`ModelStack.stand_ins`)."""
    return {item["key"]: item["paper"] for item in stand_ins}


def generation_line(stack: ModelStack) -> str:
    config = stack.config
    use = stack.generation
    return (
        f"  generation   {use.source} [{use.available}] {config.model.spec.quantization}, template "
        f"{template_name(config)}; evaluate.py: {evaluate_weights(config)} on "
        f"{device_of(config.generation.device)}"
    )


def stops_line(config: RunConfig) -> str:
    generation = config.generation
    return (
        f"  stops        base variants at {', '.join(map(repr, stop_strings('base')))}; "
        f"prompts ≤ {generation.max_prompt_tokens} tokens, answers ≤ {generation.max_new_tokens}"
    )


def retrieval_line(stack: ModelStack) -> str:
    retrieval = stack.config.retrieval
    instruction = retrieval.instruction
    return (
        f"  retrieval    {retrieval.method} (T={retrieval.threshold}, k={retrieval.top_k}, "
        f"alpha={retrieval.alpha}) on {retrieval.embedding_model} [{stack.embedder.available}], "
        f"{retrieval.device}" + (f", instruction {instruction!r} (pool and queries)" if instruction else "")
    ) + ("" if retrieval.method == "dense" else "; " + graph_modes(retrieval))


def graph_modes(retrieval: RetrievalSettings) -> str:
    """Which graph build and which PageRank the graph method runs; the scale modes say they approximate."""
    build = (
        f"approximate k-NN graph (Faiss, k={retrieval.knn_k}; recall recorded in the index stats)"
        if retrieval.graph_build == "knn"
        else "exact graph"
    )
    ranker = (
        f"approximate forward-push PageRank (eps={retrieval.ppr_eps:g}, error <= eps * degree)"
        if retrieval.ppr == "push"
        else "networkx-exact power iteration"
    )
    return f"{build}, {ranker}"


def extractors_text(stack: ModelStack) -> str:
    """Each extractor by name, REBEL's and the LLM's model with where it is found."""
    uses = {"rebel": stack.rebel, "llm": stack.llm}
    return ", ".join(
        name + (f" ({uses[name].source} [{uses[name].available}])" if name in uses else "")
        for name in stack.config.knowledge.extractors
    )


def bertscore_line(stack: ModelStack) -> str:
    encoder = stack.encoder
    return (
        f"  BERTScore    {encoder.model} [{stack.bertscore.available}] layer {encoder.layer} "
        f"({encoder.layer_from}), idf off, rescaled {rescaled(stack.config)}, "
        f"{device_of(stack.config.evaluation.metrics.bertscore.device)}"
    )


def autoais_line(stack: ModelStack) -> str:
    judge, settings = stack.judge, stack.config.evaluation.metrics.autoais
    limit = (
        f"≤ {judge.max_input_tokens} tokens ({judge.limit_from}), "
        if judge.max_input_tokens
        else f"input limit = {judge.limit_from}, "
    )
    return (
        f"  AutoAIS      {judge.model} [{stack.autoais.available}] {judge.protocol}, {settings.mode} mode, "
        f"{limit}whole premise, {device_of(settings.device)}"
    )


def callback_line(config: RunConfig) -> str:
    evaluation = config.evaluation
    return (
        f"  callback     every {evaluation.callback_every_n_validations} validation(s), "
        f"{evaluation.callback_examples} examples, {evaluation.callback_variant}, on "
        f"{evaluation.callback_device}: {', '.join(evaluation.callback_metrics)}"
    )


def baseline_lines(stack: ModelStack) -> list[str]:
    """Per baseline variant: its retriever and what runs in place of its authors' components."""
    lines = []
    for name, variant in BASELINE_VARIANTS.items():
        replaced = substitutions(name)
        lines.append(
            f"  baseline     {name}: retrieval {variant.retrieval} on {stack.embedder.source}"
            + (f"; in place of the authors' {replaced}" if replaced else "")
        )
    return lines


def memory_line(memory: dict[str, Any]) -> str:
    """Peak GiB per rank of training and evaluation, and each evaluation stage's."""
    stages = ", ".join(f"{k} {v}" for k, v in memory["evaluate"]["stages"].items())
    return (
        f"  memory       GiB per rank: train {memory['train']['peak_gib']}, evaluate "
        f"{memory['evaluate']['peak_gib']} (one stage at a time: {stages})"
    )


def missing_lines(missing: list[dict[str, str]]) -> list[str]:
    """A line per missing model, and a note on how to get them."""
    lines = [f"  missing      {item['key']}: {item['model']}" for item in missing]
    if missing:
        lines.append("               (not found here; HF_HUB_OFFLINE=1 never downloads: see --json for how)")
    return lines


def entity_types_line(stack: ModelStack) -> list[str]:
    """UniversalNER's entity types and whose choice they are (no line for spaCy entities)."""
    if stack.entity.method != "uniner":
        return []
    types = ", ".join(stack.config.evaluation.metrics.facts.entity_types)
    return [f"               entity types: {types} ({ENTITY_TYPES_NOTE})"]


def model_descriptions(stack: ModelStack, variants: Collection[str] = ()) -> dict[str, str]:
    """Per stage and per metric, one line on the model behind it, stand-ins named, and per baseline among
    ``variants`` what runs in place of its authors' components (for results.md)."""
    baselines = {
        f"{name} (baseline)": f"in place of the authors' {substitutions(name)}"
        for name in BASELINE_VARIANTS
        if name in variants and substitutions(name)
    }
    return _stage_descriptions(stack) | baselines


def _stage_descriptions(stack: ModelStack) -> dict[str, str]:
    config = stack.config
    papers = stand_in_papers(stack.stand_ins())
    bert, judge, fact, entity = stack.encoder, stack.judge, stack.fact, stack.entity
    facts, autoais = config.evaluation.metrics.facts, config.evaluation.metrics.autoais

    def tag(label: str) -> str:
        return f" — stand-in, scores labelled [{label}]" if label else " — the paper's"

    def stage(key: str) -> str:
        return f" — stand-in for {papers[key]}" if key in papers else " — the paper's"

    knowledge = config.knowledge
    stemmer = "on (not the paper's)" if config.evaluation.metrics.rouge.use_stemmer else "off, the paper's"
    return {
        "Answers": f"{stack.generation.source}, {evaluate_weights(config)}" + stage("model.spec.source"),
        "Retrieval": f"{config.retrieval.embedding_model}" + stage("retrieval.embedding_model"),
        "Knowledge": f"{knowledge.backend} ({kg_source(knowledge)})" + stage("knowledge.backend"),
        "ROUGE-1/L": f"rouge_score F1, Porter stemmer {stemmer}",
        "BERTScore": f"{bert.model} layer {bert.layer} ({bert.layer_from}), idf off, "
        f"baseline rescaling {'on' if rescaled(config) else 'off'}" + tag(bert.label),
        "Fact score": (
            f"FactSumm {FACTSUMM_VERSION} ({fact.model})"
            if fact.method == "factsumm"
            else f"triplets by {' + '.join(knowledge.extractors)}"
        )
        + tag(fact.label),
        "Entity Jaccard": (
            f"UniversalNER {entity.model} (entity types {', '.join(facts.entity_types)}: {ENTITY_TYPES_NOTE})"
            if entity.method == "uniner"
            else f"spaCy {entity.model} NER"
        )
        + tag(entity.label),
        "AutoAIS": f"{judge.model} ({judge.protocol}, {autoais.mode} mode), whole premise, inputs "
        f"over {judge.max_input_tokens or judge.limit_from} tokens counted, not judged" + tag(judge.label),
    }
