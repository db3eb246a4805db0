"""results.md's model lines: per stage and per metric, the model behind it, stand-ins named, and per
baseline what runs in place of its authors' components (:func:`model_descriptions`)."""

from __future__ import annotations

from collections.abc import Collection

from graphctx.baselines import substitutions
from graphctx.prompts import BASELINE_VARIANTS
from graphctx.stack.model_stack import ModelStack
from graphctx.stack.report_values import evaluate_weights, kg_sources, stand_in_papers


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
