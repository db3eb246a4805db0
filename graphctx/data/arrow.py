"""Stream rows into Arrow IPC files (what ``datasets.Dataset.from_file`` memory-maps) a batch at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa


class ArrowRowWriter:
    """Appends row dicts to an Arrow stream file, ``batch_rows`` at a time: memory stays flat."""

    def __init__(self, path: Path, features: datasets.Features, batch_rows: int = 1000) -> None:
        self.schema = features.arrow_schema
        self.sink = pa.OSFile(str(path), "wb")
        self.writer = pa.ipc.new_stream(self.sink, self.schema)
        self.batch_rows = batch_rows
        self.buffer: list[dict[str, Any]] = []

    def write(self, row: dict[str, Any]) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= self.batch_rows:
            self._flush()

    def _flush(self) -> None:
        if self.buffer:
            self.writer.write_batch(pa.RecordBatch.from_pylist(self.buffer, schema=self.schema))
            self.buffer.clear()

    def close(self) -> None:
        """Write what is buffered and close the file (an empty split still gets a valid file)."""
        self._flush()
        self.writer.close()
        self.sink.close()


def write_rows(path: Path, features: datasets.Features, rows: datasets.Dataset) -> None:
    """Write the rows of a (small, e.g. sampled) dataset to ``path``."""
    writer = ArrowRowWriter(path, features)
    try:
        for row in rows:
            writer.write(row)
    finally:
        writer.close()
