"""What computed each metric's scores: the parts of its fingerprint, so a rerun re-scores exactly the
metrics whose parts changed, and no other.

A metric's parts are the ``evaluation.metrics`` fields it reads (less the speed-only ``batch_size`` and
``device``; of the shared ``facts`` section only the fields of the chosen fact or entity method), what they
resolve to without loading weights (BERTScore's encoder path, layer and label; AutoAIS's judge protocol,
input limit and label), the identity of every model it runs (:func:`model_identity`: a Hub id by its cached
snapshot's commit, a folder or file by each file's path, size and modification time), and the versions of
the libraries in its path (:data:`LIBRARIES`). Only the triplet fact score adds the knowledge stage's
extractor settings (and the generation model when the LLM extractor is that model): FactSumm never reads
them. A section of :class:`MetricSettings` that no metric claims counts for every metric, so a new setting
never leaves a score stale. The fingerprint of a variant's scores adds the fingerprint of its predictions:
new answers are new scores.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from pathlib import Path
from typing import Any

from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics.choice import choose_encoder, choose_judge
from graphctx.metrics.settings import METRIC_NAMES, MetricSettings
from graphctx.model import ModelSpec

SECTIONS: dict[str, tuple[str, ...]] = {
    "rouge": ("rouge",),
    "bertscore": ("bertscore",),
    "autoais": ("autoais",),
    "fact_score": ("facts",),
    "entity_jaccard": ("facts",),
}
"""The ``evaluation.metrics`` sections each metric reads."""

FACT_FIELDS: dict[str, tuple[str, ...]] = {
    "factsumm": ("fact_method", "ner_model", "relation_model"),
    "triplets": ("fact_method", "comparable_only"),
    "uniner": ("entity_method", "uniner_model", "entity_types", "max_new_tokens"),
    "spacy": ("entity_method", "spacy_model"),
}
"""The fields of the shared ``facts`` section each fact or entity method reads."""

SPEED_ONLY = {"batch_size", "device"}
"""Metric settings that change how fast scores are made, not which."""

TORCH_MODELS = ("torch", "transformers")
LIBRARIES: dict[str, tuple[str, ...]] = {
    "rouge": ("rouge-score", "nltk"),
    "bertscore": ("bert-score", *TORCH_MODELS),
    "autoais": (*TORCH_MODELS, "gguf"),
    "factsumm": ("pysbd", *TORCH_MODELS),
    "triplets": ("nltk",),
    "uniner": TORCH_MODELS,
    "spacy": ("spacy",),
}
"""The libraries in each metric's (or fact/entity method's) path, whose versions are in its key."""

EXTRACTOR_FIELDS = ("extractors", "spacy_model")
EXTRACTOR_PREFIXES = ("rebel_", "llm_")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def model_identity(source: str | None) -> Any:
    """What a model ``source`` is on this machine, cheaply: a local file or folder by each file's (path,
    size, mtime_ns), subfolders included and links followed; an id by its cached Hub snapshot's commit
    (None when not cached); a name that is neither (a packaged stand-in such as ``tiny-random``) by itself."""
    if not source:
        return None
    path = Path(source).expanduser()
    if path.is_file():
        stat = path.stat()
        return {path.name: [stat.st_size, stat.st_mtime_ns]}
    if path.is_dir():
        return {
            str(child.relative_to(path)): [child.stat().st_size, child.stat().st_mtime_ns]
            for child in sorted(path.rglob("*"))
            if child.is_file() and not any(part.startswith(".") for part in child.relative_to(path).parts)
        }
    if source.count("/") <= 1:
        from huggingface_hub import snapshot_download

        try:
            return {"id": source, "commit": Path(snapshot_download(source, local_files_only=True)).name}
        except Exception:  # not in the local cache (or no Hub id): only its name is known
            return {"id": source, "commit": None}
    return {"name": source}


def _libraries(*groups: str) -> dict[str, str | None]:
    return {package: _version(package) for group in groups for package in LIBRARIES[group]}


def _section(settings: Any) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(settings).items() if k not in SPEED_ONLY}


def _extractor(knowledge: KnowledgeSettings, generation_model: ModelSpec) -> dict[str, Any]:
    parts = {
        k: v
        for k, v in dataclasses.asdict(knowledge).items()
        if k in EXTRACTOR_FIELDS or k.startswith(EXTRACTOR_PREFIXES)
    }
    if "rebel" in knowledge.extractors:
        parts["rebel_identity"] = model_identity(knowledge.rebel_model)
    if "llm" in knowledge.extractors:
        parts["llm_identity"] = model_identity(knowledge.llm_model or None)
    if knowledge.uses_generation_model:
        parts["generation_model"] = dataclasses.asdict(generation_model)
        parts["generation_identity"] = model_identity(generation_model.source)
    return parts


def _facts_section(settings: MetricSettings, method: str) -> dict[str, Any]:
    return {name: getattr(settings.facts, name) for name in FACT_FIELDS[method]}


def _fact_score(settings: MetricSettings, knowledge: KnowledgeSettings, spec: ModelSpec) -> dict[str, Any]:
    facts = settings.facts
    if facts.fact_method == "factsumm":
        models = {"ner": model_identity(facts.ner_model), "relation": model_identity(facts.relation_model)}
        return {"models": models, "libraries": _libraries("factsumm")}
    return {"extractor": _extractor(knowledge, spec), "libraries": _libraries("triplets")}


def _entity_jaccard(settings: MetricSettings) -> dict[str, Any]:
    facts = settings.facts
    if facts.entity_method == "uniner":
        return {"model": model_identity(facts.uniner_model), "libraries": _libraries("uniner")}
    spacy_model = facts.spacy_model
    model = model_identity(spacy_model) if Path(spacy_model).exists() else _version(spacy_model)
    return {"model": {spacy_model: model}, "libraries": _libraries("spacy")}


def metric_parts(
    settings: MetricSettings,
    knowledge: KnowledgeSettings,
    generation_model: ModelSpec,
    fact_label: str = "",
) -> dict[str, dict[str, Any]]:
    """Each metric of :data:`METRIC_NAMES` → the parts its scores depend on (predictions aside)."""
    claimed = {section for sections in SECTIONS.values() for section in sections}
    shared = {
        f.name: _section(getattr(settings, f.name))
        for f in dataclasses.fields(settings)
        if f.name not in claimed
    }
    facts = settings.facts
    parts: dict[str, dict[str, Any]] = {}
    for metric in METRIC_NAMES:
        own = {s: _section(getattr(settings, s)) for s in SECTIONS[metric] if s != "facts"}
        entry: dict[str, Any] = {"settings": own | shared}
        if metric == "rouge":
            entry["libraries"] = _libraries("rouge")
        elif metric == "bertscore":
            choice = choose_encoder(settings.bertscore)
            entry["resolved"] = {"path": choice.path, "layer": choice.layer, "label": choice.label}
            entry["model"] = model_identity(choice.path)
            entry["baseline"] = model_identity(settings.bertscore.baseline_path)
            entry["libraries"] = _libraries("bertscore")
        elif metric == "autoais":
            judge = choose_judge(settings.autoais)
            entry["resolved"] = {
                "protocol": judge.protocol,
                "max_input_tokens": judge.max_input_tokens,
                "label": judge.label,
            }
            entry["model"] = model_identity(judge.model)
            entry["libraries"] = _libraries("autoais")
        elif metric == "fact_score":
            entry["settings"]["facts"] = _facts_section(settings, facts.fact_method)
            entry |= _fact_score(settings, knowledge, generation_model)
            entry["label"] = fact_label
        elif metric == "entity_jaccard":
            entry["settings"]["facts"] = _facts_section(settings, facts.entity_method)
            entry |= _entity_jaccard(settings)
        parts[metric] = entry
    return parts


def changed(old: Any, new: Any, prefix: str = "") -> list[str]:
    """The dotted keys at which ``old`` and ``new`` (nested dicts) differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(set(old) | set(new))
        return [d for k in keys for d in changed(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [prefix.rstrip(".")]
