"""The paper's reference stack, and where a configured model is found without loading it.

Banerjee et al. (2024) run one model per stage: Llama-2 answers (and lists triplets), bge-large-en embeds
questions, REBEL extracts triplets, roberta-large (layer 17) scores BERTScore and the T5-XXL TRUE model judges
AutoAIS. Anything else a config names is a stand-in, and every output it touches says so.

A configured model is the paper's by provenance, never by shape (:func:`is_reference`): it is one of the
reference Hub ids, or a folder whose provenance shows one, i.e. a snapshot of the Hugging Face cache
(``…/models--org--name/snapshots/<revision>/``, the layout ``huggingface-cli download`` and every
``from_pretrained`` write, which records the repository id and commit the files came from). Any other
model, however shaped (bert-large-uncased for bge-large-en, flan-t5-xxl for the TRUE judge, Llama-2-chat or
CodeLlama for Llama-2, a folder with no provenance at all), is a stand-in. Provenance is read from the cache
layout rather than from a recorded hash of the weights because the paper pins no revision (so there is no
published hash to compare with), hashing 13B/11B checkpoints at every start would read tens of GB, and
``graphctx plan`` must not read weights; the layout is what the Hub client itself uses to tell which
repository and commit a folder holds. As a consistency check the folder's ``config.json`` must also have
the reference id's architecture and size (``model_type``, depth, width): a tiny model copied under a
reference id's cache path is not that model. Nothing here downloads: Hub ids are looked up in the local
Hugging Face cache only.
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
    """The paper's model of one stage: its Hub ids (aliases of one repository, or one per size) and the
    architecture shape of each, in the same order."""

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
BERTSCORE = Reference(
    "BERTScore encoder",
    ("roberta-large", "FacebookAI/roberta-large"),  # the Hub moved roberta-large under FacebookAI/
    (("roberta", 24, 1024), ("roberta", 24, 1024)),
)
BERTSCORE_LAYER = 17
"""bert-score's tuned layer for roberta-large (``bert_score.utils.model2layers``), as the paper reports."""
AUTOAIS = Reference("AutoAIS judge", ("google/t5_xxl_true_nli_mixture",), (("t5", 24, 4096),))
FACTSUMM_VERSION = "0.1.5"
"""The FactSumm release (Heo, 2021; github.com/Huffon/factsumm, tag 0.1.5, the latest on PyPI) whose fact
score ``graphctx.metrics.factsumm`` follows; 0.1.1 used flair's OntoNotes NER, 0.1.5 the models below."""
FACTSUMM_NER = Reference("FactSumm NER", ("tner/deberta-v3-large-ontonotes5",), (("deberta-v2", 24, 1024),))
FACTSUMM_RELATION = Reference(
    "FactSumm relation classifier",
    ("studio-ousia/luke-large-finetuned-tacred",),
    (("luke", 24, 1024),),
)
UNINER = Reference("UniversalNER", ("Universal-NER/UniNER-7B-type",), (("llama", 32, 4096),))
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


def provenance(source: str, revision: str | None = None) -> tuple[str, str | None] | None:
    """(Hub id, revision) ``source`` comes from: a Hub id is itself (at ``revision``); a folder (symlinks
    resolved) that is a Hugging Face cache snapshot, ``models--org--name/snapshots/<rev>``, is
    ``("org/name", rev)``; any other folder or file has none (None)."""
    if not looks_like_path(source):
        return source, revision
    path = Path(source).expanduser().resolve()
    repo = path.parent.parent.name
    if path.parent.name != "snapshots" or not repo.startswith("models--"):
        return None
    # the Hub client's own rule (huggingface_hub scan_cache_dir): models--org--name → org/name
    return repo.removeprefix("models--").replace("--", "/"), path.name


def is_reference(reference: Reference, source: str, revision: str | None = None) -> bool:
    """Whether ``source`` is the paper's model: its :func:`provenance` is a reference id (compared without
    case, as the Hub does), and its ``config.json``, where there is one here, has that id's shape. A folder
    without provenance is a stand-in, never an error."""
    found = provenance(source, revision)
    ids = [name.casefold() for name in reference.ids]
    if found is None or found[0].casefold() not in ids:
        return False
    config = find_config(source, revision)
    if config is None:
        return not looks_like_path(source)  # a reference id not cached yet is still the paper's
    return shape_of(config) == reference.shapes[ids.index(found[0].casefold())]


def display_name(source: str) -> str:
    """A short name for labels: the Hub id's last part or the folder's name."""
    return Path(source.rstrip("/")).name or source
