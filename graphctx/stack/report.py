"""``graphctx plan``'s report of a :class:`~graphctx.stack.model_stack.ModelStack`, from one table of
sections (:data:`SECTIONS`): each section's JSON value is computed once from the stack, and its lines of
text are rendered from that value, so the JSON (:func:`plan_json`) and the screen (:func:`plan_text`) cannot
disagree and a section added to the table appears in both. The metric lines are the metric entries' own
(:meth:`~graphctx.metrics.registry.MetricEntry.plan_json`, ``plan_lines``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graphctx.baselines import STAND_INS, substitutions
from graphctx.knowledge.extractors import ExtractorEntry
from graphctx.metrics.registry import device_of
from graphctx.model_use import spacy_available
from graphctx.prompts import BASELINE_VARIANTS
from graphctx.stack.model_stack import ModelStack
from graphctx.stack.report_values import (
    budget_unit,
    decoding_dtype,
    evaluate_weights,
    kg_source,
    kg_sources,
    stand_in_papers,
    stop_strings,
    weights,
)

Json = dict[str, Any]


@dataclass(frozen=True)
class Screen:
    """What a section's text lines read beside its own value: the stack (for the metric entries' lines)
    and the stand-in papers by setting key (from the ``stand_ins`` section)."""

    stack: ModelStack
    papers: dict[str, str]

    def mark(self, key: str) -> str:
        """The stand-in mark of the line of setting ``key`` ('' when it runs the paper's model)."""
        return f"   STAND-IN (paper: {self.papers[key]})" if key in self.papers else ""


@dataclass(frozen=True)
class Section:
    """One section of the plan: its JSON ``key``, its ``value`` computed from the stack, its ``lines`` of
    text rendered from that value, and ``screen``, its place on the screen (the JSON keeps table order)."""

    key: str
    value: Callable[[ModelStack], Any]
    lines: Callable[[Any, Screen], list[str]]
    screen: int


# ---- config ---------------------------------------------------------------------------------------------
def config_value(stack: ModelStack) -> str:
    return str(stack.config.path)


def config_lines(path: str, screen: Screen) -> list[str]:
    return [f"graphctx plan: {path}"]


# ---- generation -----------------------------------------------------------------------------------------
def generation_value(stack: ModelStack) -> Json:
    """The answering model: where it comes from, its weights in evaluate.py, decoding limits and stops."""
    config = stack.config
    spec, generation = config.model.spec, config.generation
    base, tuned = weights(config)
    return {
        **stack.generation.to_json(),
        "revision": spec.revision,
        "quantization": spec.quantization,
        "compute_dtype": spec.compute_dtype,
        "template": config.data.template,
        "evaluate_weights": evaluate_weights(config),
        "weights": {"base": base, "adapter": tuned},
        "device": device_of(generation.device),
        "dtype": decoding_dtype(generation),
        "max_prompt_tokens": generation.max_prompt_tokens,
        "max_new_tokens": generation.max_new_tokens,
        "stop_strings": {kind: stop_strings(kind) for kind in ("base", "adapter")},
    }


def generation_lines(value: Json, screen: Screen) -> list[str]:
    """The model and its weights, then the base variants' stops and the length limits."""
    return [
        f"  generation   {value['model']} [{value['available']}] {value['quantization']}, template "
        f"{value['template']}; evaluate.py: {value['evaluate_weights']} on {value['device']}"
        + screen.mark("model.spec.source"),
        f"  stops        base variants at {', '.join(map(repr, value['stop_strings']['base']))}; "
        f"prompts ≤ {value['max_prompt_tokens']} tokens, answers ≤ {value['max_new_tokens']}",
    ]


# ---- retrieval ------------------------------------------------------------------------------------------
def retrieval_value(stack: ModelStack) -> Json:
    """The retriever's settings and its embedding model."""
    retrieval = stack.config.retrieval
    scale = retrieval.scale
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
        # retrieval.scale's modes, under the keys plan JSON had before that section
        "graph_build": scale.graph_build,
        "knn_k": scale.knn_k if scale.graph_build == "knn" else None,
        "ppr": scale.ppr,
        "ppr_eps": scale.ppr_eps if scale.ppr == "push" else None,
    }


def retrieval_lines(value: Json, screen: Screen) -> list[str]:
    instruction = value["instruction"]
    line = (
        f"  retrieval    {value['method']} (T={value['threshold']}, k={value['top_k']}, "
        f"alpha={value['alpha']}) on {value['embedding_model']} [{value['available']}], {value['device']}"
        + (f", instruction {instruction!r} (pool and queries)" if instruction else "")
        + ("" if value["method"] == "dense" else "; " + graph_modes(value))
    )
    return [line + screen.mark("retrieval.embedding_model")]


def graph_modes(retrieval: Json) -> str:
    """Which graph build and which PageRank the graph method runs; the scale modes say they approximate."""
    build = (
        f"approximate k-NN graph (Faiss, k={retrieval['knn_k']}; recall recorded in the index stats)"
        if retrieval["graph_build"] == "knn"
        else "exact graph"
    )
    ranker = (
        f"approximate forward-push PageRank (eps={retrieval['ppr_eps']:g}, error <= eps * degree)"
        if retrieval["ppr"] == "push"
        else "networkx-exact power iteration"
    )
    return f"{build}, {ranker}"


# ---- knowledge ------------------------------------------------------------------------------------------
def knowledge_value(stack: ModelStack) -> Json:
    """The knowledge stage: its extractors, the KGs it asks (``knowledge.backend``, then
    ``knowledge.also``) and the token budget."""
    knowledge = stack.config.knowledge
    return {
        "enabled": knowledge.enabled,
        "extractors": [extractor_value(stack, entry) for entry in stack.extractors],
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


def extractor_value(stack: ModelStack, entry: ExtractorEntry) -> Json:
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


def knowledge_lines(value: Json, screen: Screen) -> list[str]:
    """The extractors (those running a model of their own: it, with where it is found), then each KG and
    the budget."""
    extractors = ", ".join(
        item["name"] + (f" ({item['model']} [{item['available']}])" if "provenance" in item else "")
        for item in value["extractors"]
    )
    sources = [(value["backend"], value["source"])] + [
        (a["name"], a["source"]) for a in value.get("also", [])
    ]
    return [
        f"  extractors   {extractors}" + screen.mark("knowledge.extractors"),
        f"  knowledge    {' + '.join(f'{name} {where}' for name, where in sources)}; budget "
        f"{value['token_budget']} {value['budget_unit']}" + screen.mark("knowledge.backend"),
    ]


# ---- metrics: each entry's own JSON and lines -------------------------------------------------------------
def metrics_value(stack: ModelStack) -> Json:
    """Each metric's scorer, in plan order."""
    return {entry.name: entry.plan_json() for entry in stack.plan_metrics}


def metrics_lines(value: Json, screen: Screen) -> list[str]:
    """Each metric's lines in plan order, the first one carrying its stand-in mark."""
    lines = []
    for entry in screen.stack.plan_metrics:
        first, *rest = entry.plan_lines() or [None]
        lines += [first + screen.mark(entry.stand_in_key()), *rest] if first else []
    return lines


# ---- callback -------------------------------------------------------------------------------------------
def callback_value(stack: ModelStack) -> Json:
    """What the validation callback answers and scores during training."""
    evaluation = stack.config.evaluation
    return {
        "every_n_validations": evaluation.callback_every_n_validations,
        "examples": evaluation.callback_examples,
        "variant": evaluation.callback_variant,
        "device": evaluation.callback_device,
        "metrics": list(evaluation.callback_metrics),
    }


def callback_lines(value: Json, screen: Screen) -> list[str]:
    return [
        f"  callback     every {value['every_n_validations']} validation(s), {value['examples']} examples, "
        f"{value['variant']}, on {value['device']}: {', '.join(value['metrics'])}"
    ]


# ---- baselines ------------------------------------------------------------------------------------------
def baselines_value(stack: ModelStack) -> dict[str, Json]:
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


def baselines_lines(value: dict[str, Json], screen: Screen) -> list[str]:
    """Per baseline variant: its retriever and what runs in place of its authors' components."""
    lines = []
    for name, item in value.items():
        replaced = substitutions(name)
        lines.append(
            f"  baseline     {name}: retrieval {item['retrieval']} on {item['embedding_model']}"
            + (f"; in place of the authors' {replaced}" if replaced else "")
        )
    return lines


# ---- stand-ins, extensions, missing models, memory ---------------------------------------------------
def stand_ins_lines(stand_ins: list[Json], screen: Screen) -> list[str]:
    stages = ", ".join(item["stage"] for item in stand_ins)
    return [f"  stand-ins    {len(stand_ins)}" + (f": {stages}" if stand_ins else "")]


def extensions_lines(extensions: list[Json], screen: Screen) -> list[str]:
    return [f"  extension    {item['key']}: {item['what']}" for item in extensions]


def missing_lines(missing: list[Json], screen: Screen) -> list[str]:
    """A line per missing model, and a note on how to get them."""
    lines = [f"  missing      {item['key']}: {item['model']}" for item in missing]
    if missing:
        lines.append("               (not found here; HF_HUB_OFFLINE=1 never downloads: see --json for how)")
    return lines


def memory_lines(memory: Json, screen: Screen) -> list[str]:
    """Peak GiB per rank of training and evaluation, and each evaluation stage's."""
    stages = ", ".join(f"{k} {v}" for k, v in memory["evaluate"]["stages"].items())
    return [
        f"  memory       GiB per rank: train {memory['train']['peak_gib']}, evaluate "
        f"{memory['evaluate']['peak_gib']} (one stage at a time: {stages}), serve "
        f"{memory['serve']['peak_gib']} (contexts and answers held together, plus the pool's index)"
    ]


# ---- the table ------------------------------------------------------------------------------------------
SECTIONS: tuple[Section, ...] = (
    Section("config", config_value, config_lines, screen=0),
    Section("generation", generation_value, generation_lines, screen=1),
    Section("retrieval", retrieval_value, retrieval_lines, screen=2),
    Section("knowledge", knowledge_value, knowledge_lines, screen=3),
    Section("metrics", metrics_value, metrics_lines, screen=4),
    Section("callback", callback_value, callback_lines, screen=5),
    Section("baselines", baselines_value, baselines_lines, screen=7),
    Section("stand_ins", ModelStack.stand_ins, stand_ins_lines, screen=6),
    Section("extensions", ModelStack.extensions, extensions_lines, screen=9),
    Section("missing", ModelStack.missing, missing_lines, screen=10),
    Section("memory", lambda stack: stack.memory, memory_lines, screen=8),
)
"""The plan's sections in JSON order; ``screen`` orders the text."""


PLAN_FILE = "plan.json"
"""Where evaluate.py leaves :func:`plan_json` of its config, beside results.md (``graphctx export``'s card
lists its stand-ins from it, as ``graphctx plan`` does)."""


def plan_json(stack: ModelStack) -> Json:
    """The whole plan, section by section (``graphctx plan --json``)."""
    return {section.key: section.value(stack) for section in SECTIONS}


def plan_text(stack: ModelStack, report: Json | None = None) -> str:
    """One screen: each section's lines in screen order, stand-ins marked, rendered from ``report``
    (default: :func:`plan_json` of ``stack``)."""
    report = report if report is not None else plan_json(stack)
    screen = Screen(stack, stand_in_papers(report["stand_ins"]))
    ordered = sorted(SECTIONS, key=lambda section: section.screen)
    return "\n".join(line for section in ordered for line in section.lines(report[section.key], screen))
