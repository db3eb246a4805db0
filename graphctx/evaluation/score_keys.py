"""What computed each metric's scores: the parts of its fingerprint, so a rerun re-scores exactly the
metrics whose parts changed.

A metric's parts are its ``evaluation.metrics`` section(s) (less the speed-only ``batch_size`` and
``device``), what the section resolves to without loading weights (BERTScore's encoder path, layer and
label; AutoAIS's judge protocol, input limit and label), the identity of each model file it reads (a Hub
id: the cached snapshot's commit; a folder or file: each file's name, size and modification time), the
version of the scoring library, and for the fact score the triplet extractor's ``knowledge`` settings (and
the generation model when the LLM extractor is that model). A section of :class:`MetricSettings` that no
metric claims counts for every metric, so a new setting never leaves a score stale. The fingerprint of a
variant's scores adds the fingerprint of its predictions: new answers are new scores.
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

SPEED_ONLY = {"batch_size", "device"}
"""Metric settings that change how fast scores are made, not which."""

LIBRARIES: dict[str, tuple[str, ...]] = {
    "rouge": ("rouge-score",),
    "bertscore": ("bert-score",),
    "entity_jaccard": ("spacy",),
    "fact_score": ("spacy", "nltk"),
}

EXTRACTOR_FIELDS = ("extractors", "spacy_model")
EXTRACTOR_PREFIXES = ("rebel_", "llm_")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def model_identity(source: str | None) -> Any:
    """What a model ``source`` is on this machine, cheaply: a local file or folder by each file's (name,
    size, mtime_ns); a Hub id by its cached snapshot's commit (None when not cached); a packaged name
    (``tiny-random``...) by its name."""
    if not source:
        return None
    path = Path(source).expanduser()
    if path.is_file():
        stat = path.stat()
        return {path.name: [stat.st_size, stat.st_mtime_ns]}
    if path.is_dir():
        return {
            child.name: [child.stat().st_size, child.stat().st_mtime_ns]
            for child in sorted(path.iterdir())
            if child.is_file() and not child.name.startswith(".")
        }
    if source.count("/") == 1:
        from huggingface_hub import snapshot_download

        try:
            return {"id": source, "commit": Path(snapshot_download(source, local_files_only=True)).name}
        except Exception:  # not in the local cache: only its id is known
            return {"id": source, "commit": None}
    return {"name": source}


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
    parts: dict[str, dict[str, Any]] = {}
    for metric in METRIC_NAMES:
        entry: dict[str, Any] = {
            "settings": {s: _section(getattr(settings, s)) for s in SECTIONS[metric]} | shared,
            "libraries": {p: _version(p) for p in LIBRARIES.get(metric, ())},
        }
        if metric == "bertscore":
            choice = choose_encoder(settings.bertscore)
            entry["resolved"] = {"path": choice.path, "layer": choice.layer, "label": choice.label}
            entry["model"] = model_identity(choice.path)
            entry["baseline"] = model_identity(settings.bertscore.baseline_path)
        elif metric == "autoais":
            judge = choose_judge(settings.autoais)
            entry["resolved"] = {
                "protocol": judge.protocol,
                "max_input_tokens": judge.max_input_tokens,
                "label": judge.label,
            }
            entry["model"] = model_identity(judge.model)
        elif metric == "fact_score":
            entry["extractor"] = _extractor(knowledge, generation_model)
            entry["label"] = fact_label
        elif metric == "entity_jaccard":
            entry["model"] = {settings.facts.spacy_model: _version(settings.facts.spacy_model)}
        parts[metric] = entry
    return parts


def changed(old: Any, new: Any, prefix: str = "") -> list[str]:
    """The dotted keys at which ``old`` and ``new`` (nested dicts) differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(set(old) | set(new))
        return [d for k in keys for d in changed(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [prefix.rstrip(".")]
