"""``graphctx plan``'s screen of text (:func:`plan_text`) and the per-stage model lines of results.md
(:func:`model_descriptions`), read from a :class:`~graphctx.stack.model_stack.ModelStack` and its config
with the values :mod:`graphctx.stack.report_json` puts in the JSON."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from graphctx.baselines import substitutions
from graphctx.metrics.registry import device_of
from graphctx.pipeline.run_config import RunConfig
from graphctx.prompts import BASELINE_VARIANTS
from graphctx.retrieval.settings import RetrievalSettings
from graphctx.stack.model_stack import ModelStack
from graphctx.stack.report_json import (
    budget_unit,
    evaluate_weights,
    kg_sources,
    stop_strings,
    template_name,
)


def plan_text(stack: ModelStack) -> str:
    """One screen: a line per stage, stand-ins marked, then what is missing."""
    stand_ins = stack.stand_ins()
    papers = stand_in_papers(stand_ins)

    def mark(key: str) -> str:
        return f"   STAND-IN (paper: {papers[key]})" if key in papers else ""

    config = stack.config
    metric_lines = []
    for entry in stack.plan_metrics:  # the first line of each metric carries its stand-in mark
        first, *rest = entry.plan_lines() or [None]
        metric_lines += [first + mark(entry.stand_in_key()), *rest] if first else []
    lines = [
        f"graphctx plan: {config.path}",
        generation_line(stack) + mark("model.spec.source"),
        stops_line(config),
        retrieval_line(stack) + mark("retrieval.embedding_model"),
        f"  extractors   {extractors_text(stack)}" + mark("knowledge.extractors"),
        f"  knowledge    {' + '.join(f'{n} {where}' for n, where in kg_sources(config.knowledge))}; "
        f"budget {config.knowledge.token_budget} {budget_unit(config)}" + mark("knowledge.backend"),
        *metric_lines,
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
    """Each extractor by name, its model (if any) with where it is found."""
    uses = stack.extractor_models
    return ", ".join(
        entry.name + (f" ({use.source} [{use.available}])" if (use := uses.get(entry.name)) else "")
        for entry in stack.extractors
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
    """Per stage, then per metric in scoring order, the model behind it, stand-ins named."""
    config = stack.config
    papers = stand_in_papers(stack.stand_ins())

    def stage(key: str) -> str:
        return f" — stand-in for {papers[key]}" if key in papers else " — the paper's"

    knowledge = config.knowledge
    stages = {
        "Answers": f"{stack.generation.source}, {evaluate_weights(config)}" + stage("model.spec.source"),
        "Retrieval": f"{config.retrieval.embedding_model}" + stage("retrieval.embedding_model"),
        "Knowledge": " + ".join(f"{n} ({where})" for n, where in kg_sources(knowledge))
        + stage("knowledge.backend"),
    }
    return stages | {entry.title or entry.name: entry.description() for entry in stack.metrics}
