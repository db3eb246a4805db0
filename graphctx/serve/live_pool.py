"""The served retrieval pool: the site's questions as they are now, persisted, with its cached index.

``<folder>/pool.jsonl`` holds the pool's rows (``id``, ``question``, ``answer``, and the dataset's other
columns), in pool order; it starts as the config's training split. An update (add, edit, delete:
:class:`~graphctx.retrieval.scale.updates.PoolUpdate`) first writes the new pool's index to the cache entry a
rebuild of the new pool reads (:func:`~graphctx.retrieval.scale.updates.update_index`), then replaces
``pool.jsonl`` atomically (temp file + rename): the rename is the commit, so a reader, a crash or a restart
sees the pool before the update or after it, each with its index, never half of one. Writers take the
folder's lock one at a time (processes included); readers take none (:meth:`LivePool.snapshot`).

The cache stays bounded: ``<folder>/indexes.json`` lists the index entries the pool's updates wrote (each
key recorded before its entry is written, so a crash leaves none unlisted). A commit removes every listed
entry but the new version's and the one before it (a worker that took the previous snapshot a moment ago
may still be reading it), so any number of writes leaves at most two of them. An entry that was in the
cache before the update wrote it (the training split's index, which the other commands read too, or one
that ``graphctx index`` built) is not listed, so never removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphctx.cache import atomic_path, cache_root, read_entry, remove_entry, write_json_atomic
from graphctx.errors import DataError
from graphctx.pipeline.pool import INDEXES_FILE, POOL_FILE, pool_index
from graphctx.retrieval.builders import build_encoder
from graphctx.retrieval.encoder import SentenceEncoder
from graphctx.retrieval.index import RetrievalIndex, index_key
from graphctx.retrieval.scale.updates import PoolUpdate, update_index
from graphctx.retrieval.settings import RetrievalSettings

LOCK_FILE = ".pool.lock"
KEPT_VERSIONS = 2
"""Index entries of updated versions kept: the committed one and the one before it."""


@dataclass(frozen=True)
class PoolSnapshot:
    """One committed version of the pool: its rows in pool order and the version they are."""

    rows: list[dict[str, Any]]
    version: tuple[int, int]
    """``pool.jsonl``'s (inode, mtime ns): every commit renames a new file in, so a new version."""


def plain_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` with the values JSON can write (dates as ISO text)."""
    return {key: value.isoformat() if hasattr(value, "isoformat") else value for key, value in row.items()}


class LivePool:
    """The pool of ``folder`` (module docstring) under ``settings``; its index entries in ``cache_dir``."""

    def __init__(self, folder: str | os.PathLike[str], settings: RetrievalSettings, cache_dir: str | None):
        self.folder = Path(folder)
        self.settings = settings
        self.cache_dir = cache_dir
        self.path = self.folder / POOL_FILE
        self._encoder: SentenceEncoder | None = None

    def start(self, initial: Iterable[Mapping[str, Any]]) -> PoolSnapshot:
        """The committed pool; on the first start, ``initial`` (the training split) committed as it."""
        with self._writing():
            if not self.path.is_file():
                self._commit(list({int(row["id"]): plain_row(row) for row in initial}.values()))
        return self.snapshot()

    def snapshot(self) -> PoolSnapshot:
        """The committed pool as it is now (one whole version: the file is only ever renamed in)."""
        with open(self.path, encoding="utf-8") as handle:
            stat = os.fstat(handle.fileno())
            rows = [json.loads(line) for line in handle if line.strip()]
        return PoolSnapshot(rows, (stat.st_ino, stat.st_mtime_ns))

    def version(self) -> tuple[int, int]:
        """The committed version's (inode, mtime ns), read without reading the rows."""
        stat = self.path.stat()
        return stat.st_ino, stat.st_mtime_ns

    def index(self, rows: Sequence[Mapping[str, Any]]) -> RetrievalIndex:
        """The cached index of the pool ``rows`` (built when missing)."""
        return pool_index(rows, self.settings, self.cache_dir)

    def apply(self, update: PoolUpdate, answers: Mapping[int, str]) -> dict[str, Any]:
        """Apply ``update`` (``answers``: the accepted answer of an added or edited question, by id; one
        not given keeps its old answer, or ``""`` for an added one) and commit it; what changed."""
        with self._writing():
            rows = self.snapshot().rows
            texts = [str(row["question"]) for row in rows]
            ids = [int(row["id"]) for row in rows]
            update.check(ids)
            written = self.written_indexes()
            key = index_key(*update.apply(ids, texts)[:2], self.settings)
            if key in written or not (self.index_root() / key).exists():  # ours, not another command's
                written = [old for old in written if old != key] + [key]
                write_json_atomic(self.folder / INDEXES_FILE, written)  # listed before it is written
            if self._encoder is None and (update.added or update.edited):
                self._encoder = build_encoder(self.settings)  # loaded once, for every later update
            index, new_texts = update_index(
                self.index(rows), texts, update, self.settings, self.cache_dir, self._encoder
            )
            by_id = {int(row["id"]): row for row in rows}
            new_rows = []
            for qid, text in zip(index.ids.tolist(), new_texts, strict=True):
                row = dict(by_id.get(qid, {"id": qid}))
                row["question"] = text
                row["answer"] = answers.get(qid, row.get("answer", ""))
                new_rows.append(row)
            self._commit(new_rows)
            self._remove_stale(written)
        return {
            "pool": len(new_rows),
            "added": [qid for qid, _ in update.added],
            "edited": [qid for qid, _ in update.edited],
            "deleted": list(update.deleted),
            "edges": index.stats.get("edges"),
        }

    def index_root(self) -> Path:
        """The cache folder of the retrieval indexes."""
        return cache_root(self.cache_dir) / "retrieval-index"

    def written_indexes(self) -> list[str]:
        """The index keys the updates wrote (``indexes.json``), oldest first."""
        listed = read_entry(self.folder / INDEXES_FILE, lambda path: json.loads(path.read_text()))
        return [str(key) for key in listed or []]

    def _remove_stale(self, written: list[str]) -> None:
        """Remove the listed index entries but the last :data:`KEPT_VERSIONS`, then unlist them."""
        for key in written[:-KEPT_VERSIONS]:
            remove_entry(self.index_root() / key)
        write_json_atomic(self.folder / INDEXES_FILE, written[-KEPT_VERSIONS:])

    def _commit(self, rows: Sequence[Mapping[str, Any]]) -> None:
        with atomic_path(self.path) as tmp, open(tmp, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
            handle.flush()
            os.fsync(handle.fileno())

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the folder's write lock (blocking: writers queue, one at a time)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / LOCK_FILE, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def check_answers(answers: Mapping[int, Any]) -> dict[int, str]:
    """The answers as text; a non-text answer is a one-line :class:`DataError`."""
    for qid, answer in answers.items():
        if not isinstance(answer, str):
            raise DataError(f"pool update: the answer of question {qid} must be text")
    return dict(answers)
