"""The paper's reference stack, and where a configured model is found without loading it.

Banerjee et al. (2024) run one model per stage: Llama-2 answers (and lists triplets), bge-large-en embeds
questions, REBEL extracts triplets, roberta-large (layer 17) scores BERTScore and the T5-XXL TRUE model judges
AutoAIS. Anything else a config names is a stand-in, and every output it touches says so.

A configured model is the paper's when it is one of the reference Hub ids, or a folder (or cached Hub id)
whose ``config.json`` has the reference architecture and size (``model_type``, depth, width): a local
mirror of roberta-large is roberta-large, a tiny random RoBERTa is not. Nothing here downloads: Hub ids are
looked up in the local Hugging Face cache only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Shape = tuple[str, int, int]
"""(``model_type``, depth, width) read from a model's ``config.json``."""


@dataclass(frozen=True)
class Reference:
    """The paper's model of one stage: its Hub ids and their architecture shapes."""

    stage: str
    ids: tuple[str, ...]
    shapes: tuple[Shape, ...]

    @property
    def name(self) -> str:
        return self.ids[0]


GENERATION = Reference(
    "generation",
    ("meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-13b-hf"),
    (("llama", 32, 4096), ("llama", 40, 5120)),
)
EMBEDDING = Reference("retrieval embedder", ("BAAI/bge-large-en",), (("bert", 24, 1024),))
REBEL = Reference("REBEL extractor", ("Babelscape/rebel-large",), (("bart", 12, 1024),))
BERTSCORE = Reference("BERTScore encoder", ("roberta-large",), (("roberta", 24, 1024),))
BERTSCORE_LAYER = 17
"""bert-score's tuned layer for roberta-large (``bert_score.utils.model2layers``), as the paper reports."""
AUTOAIS = Reference("AutoAIS judge", ("google/t5_xxl_true_nli_mixture",), (("t5", 24, 4096),))
WIKIDATA_ENDPOINT = "https://query.wikidata.org/sparql"
PAPER_EXTRACTORS = ("rebel", "llm")


def offline() -> bool:
    """Whether the Hugging Face hub is switched off (``HF_HUB_OFFLINE``): then nothing can be downloaded."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "on", "yes", "true"}


def looks_like_path(source: str) -> bool:
    """A folder or file path rather than a Hub id (``org/name`` or ``name``)."""
    return source.startswith((".", "/", "~")) or Path(source).expanduser().exists()


def find_config(source: str, revision: str | None = None) -> dict[str, Any] | None:
    """``config.json`` of a local folder or of a Hub id in the local HF cache; None when neither has it."""
    if looks_like_path(source):
        path = Path(source).expanduser() / "config.json"
    else:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(source, "config.json", revision=revision)
        path = Path(found) if isinstance(found, str) else None
    if path is None or not path.is_file():
        return None
    return json.loads(path.read_text())


def shape_of(config: dict[str, Any]) -> Shape:
    """(model_type, depth, width) of a transformers config dict (Llama, BERT, RoBERTa, BART, T5 names)."""
    depth = config.get("num_hidden_layers", config.get("num_layers", config.get("encoder_layers", 0)))
    width = config.get("hidden_size", config.get("d_model", 0))
    return str(config.get("model_type", "")), int(depth or 0), int(width or 0)


Availability = Literal["folder", "cached", "download", "missing"]


def availability(source: str, revision: str | None = None) -> Availability:
    """Where ``source`` would be read from: a local ``folder``, the HF cache (``cached``), a download
    (``download``, only when the hub is online) or nowhere (``missing``)."""
    if looks_like_path(source):
        return "folder" if (Path(source).expanduser() / "config.json").is_file() else "missing"
    if find_config(source, revision) is not None:
        return "cached"
    return "missing" if offline() else "download"


def how_to_get(key: str, source: str) -> str:
    """A one-line hint for a model that cannot be found."""
    if source.endswith(".gguf"):
        return f"{key}: GGUF file {source} does not exist"
    if looks_like_path(source):
        return f"{key}: {source} has no config.json (not a saved model folder); point {key} at one"
    return (
        f"{key}: {source!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 never downloads; "
        f"fetch it once with `huggingface-cli download {source}` (gated models: accept the licence and "
        f"`huggingface-cli login` first), or set {key} to a local folder"
    )


def is_reference(reference: Reference, source: str, revision: str | None = None) -> bool:
    """Whether ``source`` is the paper's model: a reference id, or a model with a reference shape."""
    if source in reference.ids:
        return True
    config = find_config(source, revision)
    return config is not None and shape_of(config) in reference.shapes


def display_name(source: str) -> str:
    """A short name for labels: the Hub id's last part or the folder's name."""
    return Path(source.rstrip("/")).name or source
