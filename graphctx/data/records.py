"""The row schema of graphctx Q&A datasets, and rows from tabular sources (dump rows: ``cleaning``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import datasets

from graphctx.data.cleaning import question_text
from graphctx.data.dates import canonical, parse_created
from graphctx.errors import ConfigError, DataError

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


TEXT_FIELDS = ("site", "title", "body", "question", "answer")
INTEGER_FIELDS = ("id", "score", "answer_score")


def check_column_mapping(mapping: dict[str, str]) -> None:
    """``ConfigError`` naming a ``column_mapping`` key that is not a field of graphctx rows (a typo)."""
    for ours, theirs in mapping.items():
        if ours not in FEATURES:
            raise ConfigError(
                f"data.dataset.column_mapping.{ours}: unknown field {ours!r}; "
                f"known fields: {', '.join(FEATURES)}"
            )
        if not isinstance(theirs, str) or not theirs:
            raise ConfigError(f"data.dataset.column_mapping.{ours}: {theirs!r} is not a column name")


def rows_from_table(
    table: datasets.Dataset, mapping: dict[str, str], site: str, origin: str
) -> Iterator[dict[str, Any]]:
    """Dataset rows from a tabular source whose columns are renamed by ``mapping`` (ours -> theirs).

    Every value is checked: a value of the wrong type, a ``created`` that is not a date (see
    ``graphctx.data.dates``), an empty table, a mapped or needed column that is absent, or an id used twice
    is one ``DataError`` ``origin: row N (id X), column 'C': value: problem`` (N counts data rows from 1).
    """
    columns = {ours: mapping.get(ours, ours) for ours in FEATURES}
    present = set(table.column_names)
    needed = ["answer", "created"] + (["question"] if columns["question"] in present else ["title"])
    missing = [
        f"{ours} (column '{columns[ours]}')"
        for ours in dict.fromkeys(needed + list(mapping))
        if columns[ours] not in present
    ]
    if missing:
        raise DataError(
            f"{origin}: missing columns {', '.join(missing)}; available: {sorted(present)}; "
            "map them with data.dataset.column_mapping"
        )
    if len(table) == 0:
        raise DataError(f"{origin}: the table has no rows (an empty file, or a header only)")
    ids = table[columns["id"]] if columns["id"] in present else range(len(table))
    repeated = sorted((i for i, n in Counter(ids).items() if n > 1), key=lambda i: (str(type(i)), i))
    if repeated:
        shown = ", ".join(map(str, repeated[:20])) + (
            f" and {len(repeated) - 20} more" if len(repeated) > 20 else ""
        )
        raise DataError(f"{origin}: column '{columns['id']}': duplicate question ids {shown}")
    for index, source_row in enumerate(table):
        yield _row(source_row, columns, index, site, origin)


def _row(
    source: dict[str, Any], columns: dict[str, str], index: int, site: str, origin: str
) -> dict[str, Any]:
    """One checked graphctx row from one source row."""
    where = f"{origin}: row {index + 1}"
    if source.get(columns["id"]) is not None:
        where += f" (id {source[columns['id']]})"

    def value(ours: str, default: Any, convert: Callable[[Any], Any] | None = None) -> Any:
        found = source.get(columns[ours])
        if found is None:
            return default
        try:
            return convert(found) if convert else found
        except ValueError as exc:
            raise DataError(f"{where}, column '{columns[ours]}': {_show(found)}: {exc}") from exc

    text = {name: value(name, "", _text) for name in TEXT_FIELDS}
    numbers = {name: value(name, index if name == "id" else 0, _integer) for name in INTEGER_FIELDS}
    if numbers["id"] < 0:  # graph retrieval marks "no node" with -1: a negative id would vanish there
        raise DataError(
            f"{where}, column '{columns['id']}': question id {numbers['id']} is negative; use ids >= 0"
        )
    created = value("created", None, _date)
    if not created:
        raise DataError(f"{where}, column '{columns['created']}': missing creation date")
    question = text["question"] or question_text(text["title"], text["body"])
    return {
        **numbers,
        "site": text["site"] or site,
        "title": text["title"] or (question.splitlines()[0] if question else ""),
        "body": text["body"],
        "question": question,
        "answer": text["answer"],
        "tags": value("tags", [], _tags),
        "created": created,
        "answer_created": value("answer_created", "", _date),
        "duplicate_ids": value("duplicate_ids", [], _integers),
    }


def _show(value: Any) -> str:
    """``repr`` of a bad value, cut short (a bad cell may be megabytes)."""
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected text, got {type(value).__name__}")
    return value


def _integer(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("expected an integer, got bool")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError("expected an integer")


def _integers(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise ValueError(f"expected a list of integers, got {type(value).__name__}")
    return [_integer(item) for item in value]


def _tags(value: Any) -> list[str]:
    """A list of strings, or one string ``a|b`` / ``|a|b|``."""
    if isinstance(value, str):
        return [tag for tag in value.split("|") if tag]
    if isinstance(value, list) and all(isinstance(tag, str) for tag in value):
        return value
    raise ValueError("expected a list of strings or one string 'a|b|c'")


def _date(value: Any) -> str:
    """The canonical creation date; an empty string stays empty (checked by the caller when needed)."""
    if isinstance(value, str) and not value.strip():
        return ""
    return canonical(parse_created(value))


def load_table(source: str, split: str) -> datasets.Dataset:
    """A local .json/.jsonl/.csv/.parquet file or a Hugging Face dataset id (``hf:owner/name``).

    A file that cannot be read (empty, a header only, cells of mixed types) is a ``DataError`` naming it.
    """
    if source.startswith("hf:"):
        try:
            return datasets.load_dataset(source[3:], split=split)
        except Exception as exc:
            raise DataError(f"{source}: cannot load split {split!r}: {_reason(exc)}") from exc
    path = Path(source)
    if not path.is_file():
        raise DataError(f"{path}: data file not found")
    builders = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
    builder = builders.get(path.suffix.lower())
    if builder is None:
        raise DataError(f"{path}: unsupported data file type {path.suffix!r}; use one of {sorted(builders)}")
    try:
        return datasets.load_dataset(builder, data_files=str(path), split="train")
    except Exception as exc:
        if builder != "parquet" and _at_most_one_line(path):
            raise DataError(f"{path}: the table has no rows (an empty file, or a header only)") from exc
        raise DataError(f"{path}: cannot read it as {builder}: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    """The error and its causes, innermost last (``datasets`` wraps the informative one)."""
    parts = []
    while exc is not None and len(parts) < 4:
        parts.append(f"{type(exc).__name__}: {exc}".strip().rstrip(":"))
        exc = exc.__cause__ or exc.__context__
    return "; caused by ".join(parts)


def _at_most_one_line(path: Path) -> bool:
    """Whether a text file holds at most one non-blank line (read no further than the second one)."""
    with open(path, "rb") as handle:
        lines = (line for line in handle if line.strip())
        return next(lines, None) is None or next(lines, None) is None
