"""Where evaluation rows and files go when they no longer match what would compute them: never deleted.

A rerun that finds answers made with other settings (``--overwrite``), scores of a metric whose settings
changed, shards of another fingerprint, or rows of an id outside the split moves them into
``<output_dir>/stale/<UTC timestamp>/``, under the same relative path, and appends one line per move to
``stale/<timestamp>/moved.jsonl`` (``path``, ``ids`` (null: the whole file), ``reason``). One run uses one
folder. Moving rows first appends them to the stale copy (flushed), then rewrites the source without them
(atomically): a crash in between leaves a row in both places, never in neither.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from graphctx.cache import atomic_path
from graphctx.evaluation.jsonl import dump_line, read_records


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Moved:
    """One move: ``path`` relative to the output folder; ``ids``: the rows moved (None: the whole file)."""

    path: str
    ids: list[int] | None
    reason: str


@dataclass
class StaleArea:
    """The ``stale/<timestamp>/`` folder of one run under ``output_dir`` (made on the first move)."""

    output_dir: Path
    log: Callable[[str], None] = _stderr
    moved: list[Moved] = field(default_factory=list)
    _folder: Path | None = None

    @property
    def folder(self) -> Path:
        """This run's folder: ``stale/<YYYYmmddTHHMMSSZ>``, with ``-2``, ``-3``... if taken."""
        if self._folder is None:
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            root = Path(self.output_dir) / "stale"
            root.mkdir(parents=True, exist_ok=True)
            for number in range(1, 10_000):
                candidate = root / (stamp if number == 1 else f"{stamp}-{number}")
                try:
                    candidate.mkdir()
                except FileExistsError:
                    continue
                self._folder = candidate
                break
        assert self._folder is not None
        return self._folder

    def _target(self, path: Path) -> tuple[str, Path]:
        path = Path(path)
        try:
            relative = path.resolve().relative_to(Path(self.output_dir).resolve())
        except ValueError:
            relative = Path(path.name)
        target = self.folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        return str(relative), target

    def _record(self, relative: str, ids: list[int] | None, reason: str) -> None:
        self.moved.append(Moved(relative, ids, reason))
        with open(self.folder / "moved.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"path": relative, "ids": ids, "reason": reason}) + "\n")
        what = f"{len(ids)} row(s) of {relative}" if ids is not None else relative
        self.log(f"moved aside {what} to {self.folder}: {reason}")

    def move_file(self, path: Path, reason: str) -> Path | None:
        """Move the file ``path`` (if it exists) into this run's folder; returns where it went."""
        path = Path(path)
        if not path.exists():
            return None
        relative, target = self._target(path)
        number = 1
        while target.exists():  # moved once already in this run: keep both
            number += 1
            target = target.with_name(f"{path.stem}.{number}{path.suffix}")
        os.replace(path, target)
        self._record(relative, None, reason)
        return target

    def move_rows(self, path: Path, ids: Collection[int], reason: str) -> int:
        """Move the rows of the JSONL file ``path`` whose ``id`` is in ``ids`` into this run's copy of
        it; returns how many were moved."""
        path = Path(path)
        wanted = {int(i) for i in ids}
        if not wanted:
            return 0
        records = read_records(path)
        leaving = [r for r in records if int(r["id"]) in wanted]
        if not leaving:
            return 0
        relative, target = self._target(path)
        with open(target, "a", encoding="utf-8") as handle:
            handle.write("".join(dump_line(r) for r in leaving))
            handle.flush()
            os.fsync(handle.fileno())
        with atomic_path(path) as tmp:
            tmp.write_text("".join(dump_line(r) for r in records if int(r["id"]) not in wanted))
        self._record(relative, sorted(int(r["id"]) for r in leaving), reason)
        return len(leaving)

    def summary(self) -> str:
        """One line for the end of a run ('' when nothing was moved)."""
        if not self.moved:
            return ""
        files = sum(m.ids is None for m in self.moved)
        rows = sum(len(m.ids) for m in self.moved if m.ids is not None)
        return f"moved aside {files} file(s) and {rows} row(s) to {self.folder} (see moved.jsonl there)"


def move_aside(
    output_dir: Path,
    path: Path,
    reason: str,
    ids: Collection[int] | None = None,
    area: StaleArea | None = None,
) -> StaleArea:
    """Move ``path`` (``ids`` given: only those rows of the JSONL file) under ``output_dir/stale/<time>/``
    with ``reason``; pass the returned ``area`` to later calls so a run's moves share one folder."""
    area = area or StaleArea(Path(output_dir))
    if ids is None:
        area.move_file(path, reason)
    else:
        area.move_rows(path, ids, reason)
    return area
