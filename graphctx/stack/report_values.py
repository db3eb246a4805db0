"""Values ``graphctx plan``'s sections (:mod:`graphctx.stack.report`) and results.md's model lines
(:mod:`graphctx.stack.descriptions`) both state, each read from the config."""

from __future__ import annotations

from typing import Any

from graphctx.generation.settings import GenerationSettings
from graphctx.knowledge.backends import knowledge_source, selected_sources
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.pipeline.run_config import RunConfig
from graphctx.prompts import VARIANTS


def decoding_dtype(generation: GenerationSettings) -> str:
    """The dtype evaluate.py decodes in, ``auto`` and ``fastest`` spelt out."""
    spelt = {
        "auto": "auto (bfloat16 on CUDA, float32 on CPU)",
        "fastest": "fastest (bfloat16 on CUDA and on CPUs with AVX512-BF16 or AMX, else float32)",
    }
    return spelt.get(generation.dtype, generation.dtype)


def weights(config: RunConfig) -> tuple[str, str]:
    """``(base, adapter)``: what the base-model rows (and the LLM extractor) and the fine-tuned rows run."""
    spec, generation = config.model.spec, config.generation
    dtype = decoding_dtype(generation)
    base_weights = "NF4 base dequantised" if spec.quantization == "nf4" else f"{spec.compute_dtype} base"
    tuned = (
        f"{base_weights} to {dtype}, adapter merged"
        if generation.merge_adapter
        else f"{spec.quantization} base as trained, adapter applied on the fly"
    )
    if generation.base_weights == "released":
        base = f"released weights in {dtype}"
    else:
        base = f"{base_weights} to {dtype}" if generation.merge_adapter else f"{spec.quantization} base"
    return base, tuned


def evaluate_weights(config: RunConfig) -> str:
    """The weights line of evaluate.py: fine-tuned rows, then base rows."""
    base, tuned = weights(config)
    return f"fine-tuned rows: {tuned}; base rows and LLM extractor: {base}"


def stop_strings(kind: str) -> list[str]:
    """The stop strings of the variants answered by the ``base`` or the ``adapter`` model."""
    return list(next(v for v in VARIANTS.values() if v.model == kind).stop_strings)


def kg_source(knowledge: KnowledgeSettings) -> str:
    """The SPARQL endpoint of the ``wikidata`` backend, else the local KG folder."""
    return knowledge_source(knowledge).location()


def kg_sources(knowledge: KnowledgeSettings) -> list[tuple[str, str]]:
    """``(name, where it is read from)`` of ``knowledge.backend``, then of each of ``knowledge.also``."""
    return [(source.name, source.location()) for source in selected_sources(knowledge)]


def budget_unit(config: RunConfig) -> str:
    """What ``knowledge.token_budget`` counts."""
    return f"tokens of {config.knowledge.tokenizer or config.model.spec.source}"


def stand_in_papers(stand_ins: list[dict[str, Any]]) -> dict[str, str]:
    """Setting key → the paper's model, for each of ``stand_ins`` (:meth:`ModelStack.stand_ins`)."""
    return {item["key"]: item["paper"] for item in stand_ins}
