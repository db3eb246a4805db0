"""``graphctx plan``'s report of a :class:`~graphctx.pipeline.stack.ModelStack`: one JSON object built
section by section (:func:`plan_json`), one screen of text (:func:`plan_text`) and the per-stage model
lines of results.md (:func:`model_descriptions`), each read from the stack and its config, not from one
another's output."""

from __future__ import annotations

from typing import Any

from graphctx.baselines import STAND_INS
from graphctx.generation.settings import GenerationSettings
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics.settings import ENTITY_TYPES_NOTE
from graphctx.paper import FACTSUMM_VERSION
from graphctx.pipeline.model_use import spacy_available
from graphctx.pipeline.run_config import RunConfig
from graphctx.pipeline.stack import ModelStack
from graphctx.prompts import BASELINE_VARIANTS, VARIANTS

AUTO_DEVICE = "auto (CUDA when available, else CPU)"
LIMIT_POLICY = (
    "the whole premise is judged; rows over the limit are counted (autoais_over_limit) and left out, "
    "never cut"
)


# ---- values the JSON, the text and the descriptions share -----------------------------------------------
def device_of(device: str | None) -> str:
    """A configured device, or what ``auto`` (unset) means."""
    return device or AUTO_DEVICE


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
    return knowledge.sparql_endpoint if knowledge.backend == "wikidata" else knowledge.kg_dir


def budget_unit(config: RunConfig) -> str:
    """What ``knowledge.token_budget`` counts."""
    return f"tokens of {config.knowledge.tokenizer or config.model.spec.source}"


def rescaled(config: RunConfig) -> bool:
    """Whether BERTScore is rescaled with a baseline file."""
    return config.evaluation.metrics.bertscore.baseline_path is not None


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
        "extractors": [extractor_json(stack, name) for name in knowledge.extractors],
        "backend": knowledge.backend,
        "source": kg_source(knowledge),
        "link_mentions": knowledge.link_mentions,
        "token_budget": knowledge.token_budget,
        "budget_unit": budget_unit(stack.config),
    }


def extractor_json(stack: ModelStack, name: str) -> dict[str, Any]:
    """One triplet extractor: REBEL, the LLM (maybe the generation model itself) or spaCy."""
    knowledge = stack.config.knowledge
    if name == "rebel":
        return {"name": name, **stack.rebel.to_json(), "device": knowledge.device}
    if name == "llm":
        device = "the generation model's" if stack.llm_shared else knowledge.device
        return {
            "name": name,
            **stack.llm.to_json(),
            "shares_generation_model": stack.llm_shared,
            "device": device,
        }
    return {
        "name": name,
        "model": knowledge.spacy_model,
        "available": spacy_available(knowledge.spacy_model),
        "paper": False,
    }


def metrics_json(stack: ModelStack) -> dict[str, Any]:
    """Each metric's scorer."""
    return {
        "rouge": {"use_stemmer": stack.config.evaluation.metrics.rouge.use_stemmer},
        "bertscore": bertscore_json(stack),
        "autoais": autoais_json(stack),
        "fact_score": fact_json(stack),
        "entity_jaccard": entity_json(stack),
    }


def bertscore_json(stack: ModelStack) -> dict[str, Any]:
    """BERTScore's encoder, its layer and where the layer came from, rescaling."""
    encoder, settings = stack.encoder, stack.config.evaluation.metrics.bertscore
    return {
        "model": encoder.model,
        "available": stack.bertscore.available,
        "layer": encoder.layer,
        "layer_from": encoder.layer_from,
        "idf": False,
        "rescale_with_baseline": rescaled(stack.config),
        "baseline_path": settings.baseline_path,
        "device": device_of(settings.device),
        "paper": not encoder.label,
        "label": encoder.label,
    }


def autoais_json(stack: ModelStack) -> dict[str, Any]:
    """The AutoAIS judge: its protocol and input limit."""
    judge, settings = stack.judge, stack.config.evaluation.metrics.autoais
    return {
        "model": judge.model,
        "available": stack.autoais.available,
        "protocol": judge.protocol,
        "mode": settings.mode,
        "max_input_tokens": judge.max_input_tokens,
        "limit_from": judge.limit_from,
        "limit_policy": LIMIT_POLICY,
        "device": device_of(settings.device),
        "paper": not judge.label,
        "label": judge.label,
    }


def fact_json(stack: ModelStack) -> dict[str, Any]:
    """The fact score: FactSumm's two models, or the knowledge stage's triplet extractors."""
    fact, facts = stack.fact, stack.config.evaluation.metrics.facts
    common = {"method": fact.method, "model": fact.model, "paper": fact.paper}
    if fact.method == "triplets":
        extractors = list(stack.config.knowledge.extractors)
        return {**common, "extractors": extractors, "comparable_only": facts.comparable_only} | {
            "label": fact.label
        }
    return {
        **common,
        "release": f"FactSumm {FACTSUMM_VERSION}",
        "ner_model": stack.ner.to_json(),
        "relation_model": stack.relation.to_json(),
        "device": device_of(facts.device),
        "label": fact.label,
    }


def entity_json(stack: ModelStack) -> dict[str, Any]:
    """The entity Jaccard's NER: a spaCy pipeline, or UniversalNER with its entity types."""
    entity, facts = stack.entity, stack.config.evaluation.metrics.facts
    common = {"method": entity.method, "model": entity.model, "paper": entity.paper}
    if entity.method == "spacy":
        available = spacy_available(facts.spacy_model)
        return {**common, "available": available, "label": entity.label}
    return {
        **common,
        "available": stack.uniner.available,
        "provenance": stack.uniner.provenance,
        "entity_types": list(facts.entity_types),
        "entity_types_note": ENTITY_TYPES_NOTE,
        "max_new_tokens": facts.max_new_tokens,
        "device": device_of(facts.device),
        "label": entity.label,
    }


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
