"""Append-only JSONL files of per-row results that a killed run can resume.

Each append is a single ``write`` of whole lines followed by ``fsync``, so a killed process leaves at most a
trailing partial line (if the kernel was interrupted mid-write), never a broken line in the middle. Opening
the file repairs that: a trailing fragment without its newline is cut off, and the rows before it are kept.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from graphctx.errors import DataError


def _json_safe(value: Any) -> Any:
    """NaN scores become null (JSON has no NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def dump_line(record: Mapping[str, Any]) -> str:
    """One JSON line (UTF-8 text, NaN written as null)."""
    return json.dumps({key: _json_safe(value) for key, value in record.items()}, ensure_ascii=False) + "\n"


def repair_tail(path: Path) -> int:
    """Cut a trailing partial line (no final newline) off ``path``; returns the bytes removed."""
    if not path.is_file():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return 0
        position, block = size, 1 << 16
        keep = 0
        while position > 0:  # scan back for the last newline
            start = max(0, position - block)
            handle.seek(start)
            found = handle.read(position - start).rfind(b"\n")
            if found >= 0:
                keep = start + found + 1
                break
            position = start
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
    return size - keep


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every complete line of ``path`` as a dict, ignoring a trailing partial line; [] when absent."""
    if not path.is_file():
        return []
    records = []
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith(b"\n"):
                break  # a partial last line from a killed writer
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise DataError(f"{path}: line {number} is not valid JSON ({error})") from error
    return records


def check_unique_ids(rows: Iterable[Mapping[str, Any]], source: str | os.PathLike[str]) -> None:
    """Refuse rows that share an ``id``: results are keyed by id, so a second row would replace the first's
    scores while the row count took both."""
    counts = Counter(int(row["id"]) for row in rows)
    repeated = sorted(i for i, n in counts.items() if n > 1)
    if repeated:
        raise DataError(
            f"{source}: id {repeated[0]} is on {counts[repeated[0]]} rows"
            + (f" ({len(repeated)} ids repeat)" if len(repeated) > 1 else "")
            + "; every evaluated row needs its own id"
        )


class RecordFile:
    """A JSONL file of rows keyed by ``id``: what is done, and atomic appends of new rows."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_tail(self.path)
        records = read_records(self.path)
        check_unique_ids(records, self.path)
        self.records: dict[int, dict[str, Any]] = {int(record["id"]): record for record in records}

    @property
    def done(self) -> set[int]:
        return set(self.records)

    def append(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Append rows whose ids are new, as one write of whole lines, flushed to disk; two rows with one id
        are refused."""
        fresh = [dict(r) for r in records if int(r["id"]) not in self.records]
        check_unique_ids(fresh, self.path)
        if not fresh:
            return
        data = "".join(dump_line(r) for r in fresh).encode()
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        for record in fresh:
            self.records[int(record["id"])] = record
