"""Content-addressed cache folder and atomic writes.

Every expensive artefact (datasets, embeddings, graphs, KG stores, contexts) lives under
``<cache_root>/<kind>/<key>`` where ``key`` is a hash of everything it was computed from. Writes go to a
temporary sibling first and are renamed into place, so a killed run never leaves a half-written entry that a
later run could read back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DEFAULT_CACHE_ENV = "GRAPHCTX_CACHE"


def cache_root(path: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder: ``path`` if given, else ``$GRAPHCTX_CACHE``, else ``./.cache/graphctx``."""
    root = Path(path or os.environ.get(DEFAULT_CACHE_ENV, ".cache/graphctx"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def file_digest(path: str | os.PathLike[str], chunk_bytes: int = 1 << 22) -> str:
    """SHA-256 of a file's bytes, read in chunks (flat memory for multi-GB dumps)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk_bytes):
            digest.update(block)
    return digest.hexdigest()


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-serialisable parts (settings, digests, ids)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it onto ``target``.

    Works for files and folders alike. On any exception the temporary is removed and ``target`` is left
    as it was (absent or the previous complete version).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    shutil.rmtree(tmp)
    try:
        yield tmp
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()


def write_json_atomic(target: str | os.PathLike[str], payload: Any) -> None:
    """Write ``payload`` as JSON to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str))
