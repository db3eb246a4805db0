"""The files annotation tools read and write: Doccano (text classification) and Label Studio (choices).

Written for the annotators (one file each):

- Doccano JSONL: one line per item, ``{"text": ..., "item": ..., "annotator": ..., "export": ...}``;
  Doccano keeps the keys other than ``text`` as the example's metadata and exports them back at the top
  level of each line, beside ``label`` (the list of label texts) — ``{"id", "text", "label", "Comments",
  "item", "annotator", "export"}``. Its export is a zip of one ``<user>.jsonl`` per user (or ``all.jsonl``
  for a collaborative project); both are read.
- Label Studio JSON: a list of tasks ``{"data": {"question", "answer", "item", "annotator", "export"}}``
  for :data:`LABEL_STUDIO_CONFIG`; its JSON export is the list of tasks with their
  ``annotations[].result[].value.choices``.

An AIS item (``--task ais``) also shows its attribution: the passage text and its link (``data.passage``,
``data.link``), rated with :mod:`~graphctx.evaluation.annotation.ais_form`'s questions.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphctx.errors import DataError
from graphctx.evaluation.annotation import ais_form
from graphctx.evaluation.annotation.attributions import Attribution

GOLD = "gold"
"""The source of an item showing the question's gold answer."""

HELPFULNESS, AIS = "helpfulness", "ais"
TASKS = (HELPFULNESS, AIS)
"""What annotators rate: the answer's helpfulness on 1–5 (the paper's Figure 3), or its attribution (AIS)."""


@dataclass(frozen=True)
class Item:
    """One question with one answer, as rated; ``source`` is a variant name or :data:`GOLD`; an AIS item
    also has the answer's ``attribution``."""

    id: str
    question_id: int
    source: str
    question: str
    answer: str
    attribution: Attribution | None = None


SCALE = ("1", "2", "3", "4", "5")
"""The rating labels: 1 (unhelpful or misleading) to 5 (exemplary), as in the paper."""

INSTRUCTION = "How helpful is this answer to the question? 1 = unhelpful or misleading, 5 = exemplary."

LABEL_STUDIO_CONFIG = (
    "<View>\n"
    '  <Header value="Question"/>\n'
    '  <Text name="question" value="$question"/>\n'
    '  <Header value="Answer"/>\n'
    '  <Text name="answer" value="$answer"/>\n'
    f'  <Header value="{INSTRUCTION}"/>\n'
    '  <Choices name="rating" toName="answer" choice="single-radio" showInline="true" required="true">\n'
    + "".join(f'    <Choice value="{label}"/>\n' for label in SCALE)
    + "  </Choices>\n</View>\n"
)
"""Label Studio's labeling config of the tasks: question, answer, one choice of 1–5 named ``rating``."""

DOCCANO_LABELS = [
    {"text": label, "suffix_key": label, "background_color": color, "text_color": "#ffffff"}
    for label, color in zip(SCALE, ("#d7191c", "#fdae61", "#a6a6a6", "#a6d96a", "#1a9641"), strict=True)
]
"""Doccano's label file (Labels → Actions → Import Labels) of the 1–5 scale."""


def doccano_text(item: Item) -> str:
    """What a Doccano annotator reads: the question and the answer (and an AIS item's source)."""
    if item.attribution is not None:
        found = item.attribution
        return ais_form.doccano_text(item.question, item.answer, found.text, found.link)
    return f"QUESTION\n{item.question}\n\nANSWER\n{item.answer}"


def doccano_lines(items: Sequence[Item], annotator: str, export: str) -> str:
    """The Doccano JSONL of ``items`` (in the annotator's order)."""
    lines = (
        {"text": doccano_text(item), "item": item.id, "annotator": annotator, "export": export}
        for item in items
    )
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def label_studio_tasks(items: Sequence[Item], annotator: str, export: str) -> list[dict[str, Any]]:
    """The Label Studio tasks of ``items`` (in the annotator's order)."""
    return [
        {
            "data": {
                "question": item.question,
                "answer": item.answer,
                **_source(item),
                "item": item.id,
                "annotator": annotator,
                "export": export,
            }
        }
        for item in items
    ]


def _source(item: Item) -> dict[str, str]:
    """An AIS item's passage and link (empty without one) for :data:`ais_form.LABEL_STUDIO_CONFIG`."""
    if item.attribution is None:
        return {}
    return {"passage": item.attribution.text, "link": item.attribution.link or ""}


@dataclass(frozen=True)
class Rated:
    """One exported example: where it was read, the item it shows, and the labels given to it."""

    where: str
    item: str
    annotator: str
    export: str
    labels: tuple[str, ...]


def _field(record: Any, key: str, where: str) -> str:
    if not isinstance(record, dict) or not isinstance(record.get(key), str):
        raise DataError(f"{where}: no {key!r}; is it an export of a `graphctx annotate export` file?")
    return record[key]


def _rated(record: dict[str, Any], labels: Sequence[Any], where: str) -> Rated:
    fields = [_field(record, key, where) for key in ("item", "annotator", "export")]
    return Rated(where, *fields, tuple(str(label) for label in labels))


def _doccano_records(text: str, where: str) -> Iterator[Rated]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(f"{where}: line {number} is not valid JSON ({error})") from error
        labels = record.get("label", []) if isinstance(record, dict) else None
        if not isinstance(labels, list):
            raise DataError(
                f"{where}: line {number}: 'label' is not a list; is it a text-classification export?"
            )
        yield _rated(record, labels, f"{where}: line {number}")


def read_doccano(path: Path) -> list[Rated]:
    """The examples of a Doccano text-classification export: its zip, or a JSONL file from it."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            members = sorted(name for name in archive.namelist() if name.endswith(".jsonl"))
            if not members:
                raise DataError(f"{path}: the zip holds no .jsonl file; export the project as JSONL")
            texts = [
                (f"{path}:{name}", io.TextIOWrapper(archive.open(name), "utf-8").read()) for name in members
            ]
    else:
        texts = [(str(path), _read_text(path))]
    return [rated for where, text in texts for rated in _doccano_records(text, where)]


CHOICE_NAMES = ("rating", ais_form.INTERPRETABLE_NAME, ais_form.ATTRIBUTABLE_NAME)
"""The choice names of the labeling configs: the 1–5 rating, the two AIS stages."""


def _choices(annotation: dict[str, Any]) -> list[Any]:
    """The chosen values of an annotation's results of :data:`CHOICE_NAMES`."""
    results = annotation.get("result", [])
    return [
        choice
        for result in results
        if isinstance(result, dict)
        and result.get("type") == "choices"
        and result.get("from_name") in CHOICE_NAMES
        for choice in result.get("value", {}).get("choices", [])
    ]


def read_label_studio(path: Path) -> list[Rated]:
    """The tasks of a Label Studio JSON export; each annotation not cancelled gives its chosen rating."""
    try:
        tasks = json.loads(_read_text(path))
    except json.JSONDecodeError as error:
        raise DataError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(tasks, list):
        raise DataError(f"{path}: not a list of tasks; export the Label Studio project as JSON")
    if tasks and all(isinstance(t, dict) and "data" not in t and "item" in t for t in tasks):
        raise DataError(
            f"{path}: a Label Studio JSON_MIN export (flat rows, without the annotations); export the "
            "project as JSON (not JSON_MIN) and import that file"
        )
    rated = []
    for number, task in enumerate(tasks, start=1):
        where = f"{path}: task {number}"
        annotations = task.get("annotations", []) if isinstance(task, dict) else []
        labels = [c for a in annotations if not a.get("was_cancelled") for c in _choices(a)]
        rated.append(_rated(task.get("data") if isinstance(task, dict) else None, labels, where))
    return rated


def read_ratings(path: Path) -> list[Rated]:
    """A ratings file by its kind: ``.json`` from Label Studio, ``.jsonl`` or ``.zip`` from Doccano."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such ratings file")
    if path.suffix == ".json":
        return read_label_studio(path)
    if path.suffix in (".jsonl", ".zip"):
        return read_doccano(path)
    raise DataError(f"{path}: unknown kind of ratings file (.json: Label Studio; .jsonl or .zip: Doccano)")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise DataError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from error
