"""Content-addressed cache folder, atomic writes, and entries that heal.

Every expensive artefact (datasets, embeddings, graphs, KG stores, contexts) lives under
``<cache_root>/<kind>/<key>`` where ``key`` is a hash of everything it was computed from. Writes go to a
temporary sibling first and are renamed into place, so a killed run never leaves a half-written entry that a
later run could read back. An entry that fails to load all the same (a disk fault, a copy cut short) is
reported with its path and moved aside by :func:`read_entry`, and the caller rebuilds it.

The cache is bounded two ways: ``graphctx cache --prune`` removes the entries no config reaches, and a
config's ``cache_max_bytes`` caps the folder: each new folder entry (:func:`publish_once`: a model, a
dataset, an index, a KG store) first removes the least recently used entries (oldest mtime; a read touches
it, :func:`read_entry`) until the cache fits. Entries are removed whole and atomically (:func:`remove_entry`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from graphctx.errors import DataError

DEFAULT_CACHE_ENV = "GRAPHCTX_CACHE"

SERVE_POOL = "serve-pool"
"""``graphctx serve``'s live pool folder in the cache (its default ``--pool-dir``)."""

STATE_FOLDERS = frozenset({SERVE_POOL})
"""Folders of the cache that hold state, not entries (``graphctx serve``'s live pool): never removed."""

CAPS: dict[Path, int] = {}
"""The size cap of each cache folder (absolute), set by the configs this process loaded
(:func:`cap_cache`)."""

UNREADABLE = (OSError, ValueError, RuntimeError, EOFError, KeyError, TypeError, pickle.UnpicklingError)
"""What reading a damaged cache entry raises (torch.load, json, safetensors headers, missing files, keys)."""

T = TypeVar("T")


def cache_root(path: str | os.PathLike[str] | None = None) -> Path:
    """The cache folder: ``path`` if given, else ``$GRAPHCTX_CACHE``, else ``./.cache/graphctx``."""
    root = Path(path or os.environ.get(DEFAULT_CACHE_ENV, ".cache/graphctx"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def cache_path(path: str | os.PathLike[str] | None = None) -> Path:
    """:func:`cache_root`'s folder, absolute, without creating it."""
    return Path(path or os.environ.get(DEFAULT_CACHE_ENV, ".cache/graphctx")).absolute()


def cap_cache(path: str | os.PathLike[str] | None, max_bytes: int | None) -> None:
    """Cap the cache folder ``path`` (:func:`cache_root`'s rule) at ``max_bytes`` for this process's
    writes; None: no cap."""
    if max_bytes is None:
        CAPS.pop(cache_path(path), None)
    else:
        CAPS[cache_path(path)] = max_bytes


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
def _sibling(target: Path) -> Iterator[Path]:
    """A fresh temporary path beside ``target`` (not created), removed afterwards if still there."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    shutil.rmtree(tmp)
    try:
        yield tmp
    finally:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it onto ``target``.

    Works for files and folders alike. On any exception the temporary is removed and ``target`` is left
    as it was (absent or the previous complete version). One writer at a time: for a cache entry that
    several processes may build at once, use :func:`publish_once`.
    """
    target = Path(target)
    with _sibling(target) as tmp:
        yield tmp
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(tmp, target)


@contextlib.contextmanager
def publish_once(target: str | os.PathLike[str]) -> Iterator[Path]:
    """:func:`atomic_path` for a content-addressed cache folder that several processes may build at once
    (the ranks of one run, nodes sharing the cache folder): the first complete folder published stays, and
    a later one, equal by its key, is dropped. An entry is never replaced under a process reading it, and
    two publishers never collide (replacing a folder is not atomic: remove, then rename)."""
    target = Path(target)
    with _sibling(target) as tmp:
        yield tmp
        try:
            os.rename(tmp, target)  # refuses a target folder that has files
        except OSError:
            if not target.exists():
                raise
            # another process published this entry first: keep it
    for root, cap in CAPS.items():
        if target.absolute().is_relative_to(root):
            trim(root, cap, keep=target.absolute())


def write_json_atomic(target: str | os.PathLike[str], payload: Any) -> None:
    """Write ``payload`` as JSON to ``target`` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str))


def move_aside(entry: Path, error: BaseException) -> None:
    """Rename a cache entry that failed to load to ``.<name>.broken-<random>`` beside it (never read again;
    delete it when looked at) and say so on stderr; if it cannot be moved, the error names the path to
    delete."""
    aside = entry.with_name(f".{entry.name}.broken-{uuid.uuid4().hex[:8]}")
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    try:
        os.replace(entry, aside)
    except FileNotFoundError:  # another process moved it aside first
        return
    except OSError as move_error:
        raise DataError(
            f"{entry}: cache entry cannot be read ({reason}) nor moved aside ({move_error}); delete {entry} "
            "and rerun"
        ) from error
    print(
        f"graphctx: cache entry {entry} cannot be read ({reason}); moved to {aside.name}, rebuilding",
        file=sys.stderr,
        flush=True,
    )


def read_entry(entry: str | os.PathLike[str], load: Callable[[Path], T]) -> T | None:
    """``load(entry)``, or ``None`` for the caller to rebuild: when ``entry`` is absent, or when loading it
    raises one of :data:`UNREADABLE` (it is then moved aside, see :func:`move_aside`)."""
    entry = Path(entry)
    if not entry.exists():
        return None
    try:
        value = load(entry)
    except UNREADABLE as error:
        move_aside(entry, error)
        return None
    with contextlib.suppress(OSError):  # the LRU mark: a read-only cache still reads
        os.utime(entry)
    return value


def remove_entry(entry: str | os.PathLike[str]) -> bool:
    """Remove a cache entry (file or folder) atomically: rename it to a hidden sibling first, so a reader
    sees the whole entry or none of it, then delete that sibling. ``False`` when it was already gone."""
    entry = Path(entry)
    doomed = entry.with_name(f".{entry.name}.removed-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(entry, doomed)
    except FileNotFoundError:
        return False
    if doomed.is_dir() and not doomed.is_symlink():
        shutil.rmtree(doomed, ignore_errors=True)
    else:
        doomed.unlink(missing_ok=True)
    return True


def entries(root: str | os.PathLike[str]) -> dict[str, list[Path]]:
    """The entries of the cache folder ``root`` by kind (``<root>/<kind>/<entry>``), less hidden names
    (temporaries, entries moved aside) and :data:`STATE_FOLDERS`."""
    root = Path(root)
    if not root.is_dir():
        return {}
    return {
        kind.name: sorted(entry for entry in kind.iterdir() if not entry.name.startswith("."))
        for kind in sorted(root.iterdir())
        if kind.is_dir() and not kind.name.startswith(".") and kind.name not in STATE_FOLDERS
    }


def entry_bytes(entry: Path) -> int:
    """The bytes of an entry's files (a folder's, every file below it)."""
    if not entry.is_dir():
        return entry.stat().st_size
    return sum(path.stat().st_size for path in entry.rglob("*") if path.is_file() and not path.is_symlink())


def trim(root: Path, max_bytes: int, keep: Path | None = None) -> list[Path]:
    """Remove the least recently used entries of the cache ``root`` (oldest mtime first, ``keep`` never)
    until its entries hold at most ``max_bytes``; the entries removed."""
    sized = [
        (entry.stat().st_mtime, entry, entry_bytes(entry))
        for kind in entries(root).values()
        for entry in kind
    ]
    total = sum(size for _, _, size in sized)
    removed = []
    for _, entry, size in sorted(sized, key=lambda item: item[0]):
        if total <= max_bytes:
            break
        if entry.absolute() != keep and remove_entry(entry):
            total -= size
            removed.append(entry)
    return removed
