"""``graphctx plan``'s report of a :class:`~graphctx.stack.model_stack.ModelStack`: one JSON object built
section by section (:func:`plan_json`), one screen of text (:func:`plan_text`) and the per-stage model
lines of results.md (:func:`model_descriptions`), each read from the stack and its config, not from one
another's output."""

from __future__ import annotations

from typing import Any

from graphctx.baselines import STAND_INS
from graphctx.generation.settings import GenerationSettings
from graphctx.knowledge.backends import knowledge_source, selected_sources
from graphctx.knowledge.extractors import ExtractorEntry
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics.registry import device_of
from graphctx.model_use import spacy_available
from graphctx.pipeline.run_config import RunConfig
from graphctx.prompts import BASELINE_VARIANTS, VARIANTS
from graphctx.stack.model_stack import ModelStack


# ---- values the JSON, the text and the descriptions share -----------------------------------------------
def decoding_dtype(generation: GenerationSettings) -> str:
    """The dtype evaluate.py decodes in, ``auto`` spelt out."""
    return generation.dtype if generation.dtype != "auto" else "auto (bfloat16 on CUDA, float32 on CPU)"


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


def template_name(config: RunConfig) -> str:
    """The configured prompt template's name."""
    return config.data.template


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


# ---- JSON -------------------------------------------------------------------------------------------------
def plan_json(stack: ModelStack) -> dict[str, Any]:
    """The whole plan, section by section (``graphctx plan --json``)."""
    return {
        "config": str(stack.config.path),
        "generation": generation_json(stack),
        "retrieval": retrieval_json(stack),
        "knowledge": knowledge_json(stack),
        "metrics": metrics_json(stack),
        "callback": callback_json(stack.config),
        "baselines": baselines_json(stack),
        "stand_ins": stack.stand_ins(),
        "extensions": stack.extensions(),
        "missing": stack.missing(),
        "memory": stack.memory,
    }


def generation_json(stack: ModelStack) -> dict[str, Any]:
    """The answering model: where it comes from, its weights in evaluate.py, decoding limits and stops."""
    config = stack.config
    spec, generation = config.model.spec, config.generation
    base, tuned = weights(config)
    return {
        **stack.generation.to_json(),
        "revision": spec.revision,
        "quantization": spec.quantization,
        "compute_dtype": spec.compute_dtype,
        "template": template_name(config),
        "evaluate_weights": evaluate_weights(config),
        "weights": {"base": base, "adapter": tuned},
        "device": device_of(generation.device),
        "dtype": decoding_dtype(generation),
        "max_prompt_tokens": generation.max_prompt_tokens,
        "max_new_tokens": generation.max_new_tokens,
        "stop_strings": {kind: stop_strings(kind) for kind in ("base", "adapter")},
    }


def retrieval_json(stack: ModelStack) -> dict[str, Any]:
    """The retriever's settings and its embedding model."""
    retrieval = stack.config.retrieval
    return {
        "method": retrieval.method,
        "embedding_model": retrieval.embedding_model,
        "available": stack.embedder.available,
        "paper": stack.embedder.is_paper,
        "instruction": retrieval.instruction,
        "threshold": retrieval.threshold,
        "top_k": retrieval.top_k,
        "alpha": retrieval.alpha,
        "device": retrieval.device,
        "graph_build": retrieval.graph_build,
        "knn_k": retrieval.knn_k if retrieval.graph_build == "knn" else None,
        "ppr": retrieval.ppr,
        "ppr_eps": retrieval.ppr_eps if retrieval.ppr == "push" else None,
    }


def knowledge_json(stack: ModelStack) -> dict[str, Any]:
    """The knowledge stage: its extractors, the KG it asks and the token budget."""
    knowledge = stack.config.knowledge
    return {
        "enabled": knowledge.enabled,
        "extractors": [extractor_json(stack, entry) for entry in stack.extractors],
        "backend": knowledge.backend,
        "source": kg_source(knowledge),
        **(
            {"also": [{"name": name, "source": where} for name, where in kg_sources(knowledge)[1:]]}
            if knowledge.also
            else {}
        ),
        "link_mentions": knowledge.link_mentions,
        "token_budget": knowledge.token_budget,
        "budget_unit": budget_unit(stack.config),
    }


def extractor_json(stack: ModelStack, entry: ExtractorEntry) -> dict[str, Any]:
    """One triplet extractor: its model (maybe the generation model itself) or spaCy pipeline, then what
    it declares beside it (:meth:`~graphctx.knowledge.extractors.ExtractorEntry.plan_details`)."""
    use = stack.extractor_models.get(entry.name)
    if use is not None:
        found = use.to_json()
    else:
        found = {"paper": False}
        for _, pipeline in entry.pipelines()[:1]:
            found = {"model": pipeline, "available": spacy_available(pipeline), "paper": False}
    return {"name": entry.name, **found, **entry.plan_details()}


def metrics_json(stack: ModelStack) -> dict[str, Any]:
    """Each metric's scorer, in plan order."""
    return {entry.name: entry.plan_json() for entry in stack.plan_metrics}


def callback_json(config: RunConfig) -> dict[str, Any]:
    """What the validation callback answers and scores during training."""
    evaluation = config.evaluation
    return {
        "every_n_validations": evaluation.callback_every_n_validations,
        "examples": evaluation.callback_examples,
        "variant": evaluation.callback_variant,
        "device": evaluation.callback_device,
        "metrics": list(evaluation.callback_metrics),
    }


def baselines_json(stack: ModelStack) -> dict[str, dict[str, Any]]:
    """Per baseline variant (chosen by name in ``--variants``): its retriever's model and what runs in
    place of its authors' components (``graphctx.baselines``)."""
    embedder, genqa = stack.embedder, stack.genqa
    return {
        name: {
            "retrieval": variant.retrieval,
            "embedding_model": embedder.source,
            "available": embedder.available,
            "stand_ins": STAND_INS[name],
            **({"model": genqa.source, "model_available": genqa.available} if name == "GenQA" else {}),
        }
        for name, variant in BASELINE_VARIANTS.items()
    }
