"""The row schema of graphctx Q&A datasets, and rows from tabular sources (dump rows: ``cleaning``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets

from graphctx.data.cleaning import question_text
from graphctx.errors import DataError

FEATURES = datasets.Features(
    {
        "id": datasets.Value("int64"),
        "site": datasets.Value("string"),
        "title": datasets.Value("string"),
        "body": datasets.Value("string"),
        "question": datasets.Value("string"),
        "answer": datasets.Value("string"),
        "tags": datasets.Sequence(datasets.Value("string")),
        "created": datasets.Value("string"),
        "answer_created": datasets.Value("string"),
        "score": datasets.Value("int64"),
        "answer_score": datasets.Value("int64"),
        "duplicate_ids": datasets.Sequence(datasets.Value("int64")),
    }
)


def rows_from_table(
    table: datasets.Dataset, mapping: dict[str, str], site: str, origin: str
) -> Iterator[dict[str, Any]]:
    """Dataset rows from a tabular source whose columns are renamed by ``mapping`` (ours -> theirs)."""
    columns = {ours: mapping.get(ours, ours) for ours in FEATURES}
    present = set(table.column_names)
    needed = ["answer", "created"] + (["question"] if columns["question"] in present else ["title"])
    missing = [f"{ours} (column '{columns[ours]}')" for ours in needed if columns[ours] not in present]
    if missing:
        raise DataError(
            f"{origin}: missing columns {', '.join(missing)}; available: {sorted(present)}; "
            "map them with data.dataset.column_mapping"
        )
    for index, source_row in enumerate(table):

        def value(ours: str, default: Any, row: dict[str, Any] = source_row) -> Any:
            found = row.get(columns[ours])
            return default if found is None else found

        body = str(value("body", ""))
        question = str(value("question", "")) or question_text(str(value("title", "")), body)
        title = str(value("title", "")) or (question.splitlines()[0] if question else "")
        tags = value("tags", [])
        yield {
            "id": int(value("id", index)),
            "site": str(value("site", site)),
            "title": title,
            "body": body,
            "question": question,
            "answer": str(value("answer", "")),
            "tags": tags if isinstance(tags, list) else [tag for tag in str(tags).split("|") if tag],
            "created": str(value("created", "")),
            "answer_created": str(value("answer_created", "")),
            "score": int(value("score", 0)),
            "answer_score": int(value("answer_score", 0)),
            "duplicate_ids": [int(i) for i in value("duplicate_ids", [])],
        }


def load_table(source: str, split: str) -> datasets.Dataset:
    """A local .json/.jsonl/.csv/.parquet file or a Hugging Face dataset id (``hf:owner/name``)."""
    if source.startswith("hf:"):
        return datasets.load_dataset(source[3:], split=split)
    path = Path(source)
    if not path.is_file():
        raise DataError(f"{path}: data file not found")
    builders = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
    builder = builders.get(path.suffix.lower())
    if builder is None:
        raise DataError(f"{path}: unsupported data file type {path.suffix!r}; use one of {sorted(builders)}")
    return datasets.load_dataset(builder, data_files=str(path), split="train")
