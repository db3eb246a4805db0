"""A blinded, shuffled annotation set from evaluate.py's predictions (``graphctx annotate export``).

The items: N questions, drawn with the seed from those every chosen variant answered, each shown once with
each variant's answer and once with its gold (accepted) answer. The annotators of a site rate the same items,
each in their own seeded order. What an annotator sees names no variant: an item id is
``<tag>-<k>``, ``tag`` the first 8 hex digits of the export's fingerprint and ``k`` the item's place in a
seeded shuffle of all items. Only the private key file maps an id back to its question and its source
(a variant, or ``gold``).

The fingerprint is the SHA-256 of the export's content (site, seed, annotators, and each item's question id,
source and answer text), so ratings can be checked against the key they were made from.

With ``task`` ais (human AIS, Attributed QA), there is no gold item: each variant's answer is shown once per
attribution of its prediction line (one per architecture), with the attributed passage and its link; the
key also holds each item's attribution (architecture, passage id, the judge's probability, whether the judge
chose the passage), and the fingerprint covers it.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphctx.cache import atomic_path
from graphctx.errors import ConfigError, DataError
from graphctx.evaluation.annotation import ais_form
from graphctx.evaluation.annotation.attributions import FIELD, Attribution, read_attributions
from graphctx.evaluation.annotation.formats import (
    AIS,
    DOCCANO_LABELS,
    GOLD,
    HELPFULNESS,
    LABEL_STUDIO_CONFIG,
    TASKS,
    Item,
    doccano_lines,
    label_studio_tasks,
)
from graphctx.evaluation.jsonl import check_unique_ids, read_records
from graphctx.paths import check_site


@dataclass(frozen=True)
class ExportSpec:
    """What to export: ``questions`` questions of ``site`` × (``variants`` + gold), for ``annotators``, to
    rate for ``task`` (:data:`TASKS`; with ais: × each variant's attributions, no gold)."""

    site: str
    variants: tuple[str, ...]
    questions: int
    annotators: tuple[str, ...]
    seed: int = 0
    task: str = HELPFULNESS

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ConfigError(f"--task {self.task}: choose one of {list(TASKS)}")
        if self.questions < 1:
            raise ConfigError(f"--questions {self.questions}: choose at least 1")
        for what, names in (("--variants", self.variants), ("--annotators", self.annotators)):
            if not names:
                raise ConfigError(f"{what}: name at least one")
            if len(set(names)) < len(names):
                raise ConfigError(f"{what} {' '.join(names)}: a name is given twice")
        check_site(self.site, "site")
        if GOLD in self.variants:
            raise ConfigError(f"--variants: {GOLD!r} is the gold answer, always included; name variants only")
        bad = [name for name in self.annotators if not name.replace("-", "").replace("_", "").isalnum()]
        if bad:
            raise ConfigError(f"--annotators: {bad[0]!r} is not a file name (letters, digits, - and _ only)")


def read_predictions(
    directory: Path, variants: Sequence[str], task: str = HELPFULNESS
) -> dict[str, dict[int, dict[str, Any]]]:
    """Per variant, its predictions (``<directory>/<variant>.jsonl``, the rows evaluate.py writes) by id;
    for ``task`` ais, each row's ``attributions`` read into :class:`Attribution` (refused in one line when a
    row has none)."""
    answers = {}
    for variant in variants:
        path = Path(directory) / f"{variant}.jsonl"
        if not path.is_file():
            found = sorted(p.stem for p in Path(directory).glob("*.jsonl"))
            raise DataError(f"{path}: no predictions of variant {variant!r} (found: {found or 'none'})")
        rows = read_records(path)
        check_unique_ids(rows, path)
        for number, row in enumerate(rows, start=1):
            missing = [key for key in ("id", "question", "generated", "gold") if key not in row]
            if missing:
                raise DataError(f"{path}: line {number} has no {missing[0]!r}; is it evaluate.py's output?")
            if task == AIS:
                row[FIELD] = read_attributions(row, f"{path}: line {number}")
        answers[variant] = {int(row["id"]): row for row in rows}
    return answers


def draw_questions(answers: Mapping[str, Mapping[int, dict[str, Any]]], spec: ExportSpec) -> list[int]:
    """``spec.questions`` ids, drawn with the seed from those every variant answered (sorted)."""
    common = sorted(set.intersection(*(set(rows) for rows in answers.values())))
    if len(common) < spec.questions:
        raise DataError(
            f"--questions {spec.questions}: only {len(common)} questions are answered by every one of "
            f"{list(spec.variants)}"
        )
    return sorted(random.Random(spec.seed).sample(common, spec.questions))


Content = tuple[str, str, str, Attribution | None]
"""An item's source, question, answer and (AIS items) attribution."""


def _contents(answers: Mapping[str, Mapping[int, dict[str, Any]]], question_id: int) -> list[Content]:
    """(source, question, answer, None) of each variant and of gold for one question; variants must agree
    on the question and its gold answer (else they come from different datasets)."""
    rows = [answers[variant][question_id] for variant in answers]
    for variant, row in zip(answers, rows, strict=True):
        if (row["question"], row["gold"]) != (rows[0]["question"], rows[0]["gold"]):
            first = next(iter(answers))
            raise DataError(
                f"question {question_id}: the predictions of {variant!r} and {first!r} show another question "
                "or gold answer; export predictions of one dataset"
            )
    gold = (GOLD, rows[0]["question"], rows[0]["gold"], None)
    return [
        (variant, row["question"], row["generated"], None) for variant, row in zip(answers, rows, strict=True)
    ] + [gold]


def _ais_contents(answers: Mapping[str, Mapping[int, dict[str, Any]]], question_id: int) -> list[Content]:
    """Each variant's answer once per attribution of its row (read by :func:`read_predictions`)."""
    _contents(answers, question_id)  # the variants agree on the question
    return [
        (variant, rows[question_id]["question"], rows[question_id]["generated"], attribution)
        for variant, rows in answers.items()
        for attribution in rows[question_id][FIELD]
    ]


def _fingerprinted(source: str, answer: str, attribution: Attribution | None) -> tuple[str, str]:
    """What the fingerprint covers of an item besides its question: the source and the answer, and an AIS
    item's architecture and attribution."""
    if attribution is None:
        return source, answer
    return f"{source}/{attribution.architecture}", json.dumps([answer, attribution.to_json()], sort_keys=True)


def fingerprint(spec: ExportSpec, contents: Sequence[tuple[int, str, str]]) -> str:
    """SHA-256 of the site, seed, annotators and each (question id, source, SHA-256 of the answer)."""
    digest = [(qid, source, hashlib.sha256(answer.encode()).hexdigest()) for qid, source, answer in contents]
    payload = {"site": spec.site, "seed": spec.seed, "annotators": spec.annotators, "items": sorted(digest)}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def make_items(
    answers: Mapping[str, Mapping[int, dict[str, Any]]], spec: ExportSpec
) -> tuple[list[Item], str]:
    """The export's items (in id order) and its fingerprint."""
    contents = _ais_contents if spec.task == AIS else _contents
    drawn = [(qid, *content) for qid in draw_questions(answers, spec) for content in contents(answers, qid)]
    export = fingerprint(spec, [(qid, *_fingerprinted(s, answer, at)) for qid, s, _, answer, at in drawn])
    random.Random(f"{spec.seed}:{export}").shuffle(drawn)
    width = len(str(len(drawn)))
    items = [
        Item(f"{export[:8]}-{k:0{width}d}", qid, source, question, answer, attribution)
        for k, (qid, source, question, answer, attribution) in enumerate(drawn, start=1)
    ]
    return items, export


def annotator_order(items: Sequence[Item], annotator: str, export: str) -> list[Item]:
    """``items`` in ``annotator``'s own order (seeded by the export and the annotator's name)."""
    ordered = list(items)
    random.Random(f"{export}:{annotator}").shuffle(ordered)
    return ordered


def key_payload(items: Sequence[Item], spec: ExportSpec, export: str) -> dict[str, Any]:
    """The private key: the export's settings and fingerprint, and each item id's question and source (and
    an AIS item's attribution)."""
    return {
        "fingerprint": export,
        "task": spec.task,
        "site": spec.site,
        "variants": list(spec.variants),
        "annotators": list(spec.annotators),
        "questions": spec.questions,
        "seed": spec.seed,
        "items": {item.id: _key_entry(item) for item in items},
    }


def _key_entry(item: Item) -> dict[str, Any]:
    entry = {"question_id": item.question_id, "source": item.source}
    return entry if item.attribution is None else {**entry, "attribution": item.attribution.to_json()}


KEY_FILE = "key.json"
"""The private key inside an export folder (not for the annotators)."""


def check_replaceable(out: Path) -> None:
    """Refuse, in one line, to replace ``out`` unless it is an export folder: one holding this command's
    ``key.json`` (a JSON object with its ``fingerprint`` and ``items``) and nothing but export files. So
    ``--overwrite`` never deletes an evaluation run, a training root or any folder it did not write."""
    if not out.is_dir():
        raise ConfigError(f"--out {out}: is a file, not a folder; choose a folder")
    try:
        key = json.loads((out / KEY_FILE).read_text())
    except (OSError, ValueError):
        key = None
    others = [p.name for p in out.iterdir() if p.name not in (KEY_FILE, "doccano", "label-studio")]
    if not isinstance(key, dict) or not {"fingerprint", "items"} <= key.keys() or others:
        raise ConfigError(
            f"--out {out}: --overwrite replaces only a folder `graphctx annotate export` wrote (its "
            f"{KEY_FILE} and the doccano/ and label-studio/ folders); this one is not: choose another folder"
        )


def write_export(
    out: Path, items: Sequence[Item], spec: ExportSpec, export: str, overwrite: bool
) -> list[Path]:
    """Write the export folder ``out`` at once (built beside it, then renamed)::

        key.json                      private: item id -> question id, source; the fingerprint
        doccano/<annotator>.jsonl     one per annotator, to import into a Doccano text-classification project
        doccano/labels.json           the labels 1..5, or AIS's (Doccano's label import)
        label-studio/<annotator>.json one per annotator, tasks for label-studio/labeling_config.xml
        label-studio/labeling_config.xml

    An existing ``out`` is refused unless ``overwrite``, and ``overwrite`` replaces only a folder this
    command wrote (:func:`check_replaceable`). Returns the files written (under ``out``)."""
    out = Path(out)
    if out.exists() and not overwrite:
        raise ConfigError(f"--out {out}: already exists; choose another folder or pass --overwrite")
    if out.exists():
        check_replaceable(out)
    with atomic_path(out) as tmp:
        (tmp / "doccano").mkdir(parents=True)
        (tmp / "label-studio").mkdir()
        (tmp / KEY_FILE).write_text(json.dumps(key_payload(items, spec, export), indent=2) + "\n")
        ais = spec.task == AIS
        labels, config = (
            (ais_form.DOCCANO_LABELS, ais_form.LABEL_STUDIO_CONFIG)
            if ais
            else (DOCCANO_LABELS, LABEL_STUDIO_CONFIG)
        )
        (tmp / "doccano" / "labels.json").write_text(json.dumps(labels, indent=2) + "\n")
        (tmp / "label-studio" / "labeling_config.xml").write_text(config)
        for annotator in spec.annotators:
            ordered = annotator_order(items, annotator, export)
            (tmp / "doccano" / f"{annotator}.jsonl").write_text(doccano_lines(ordered, annotator, export))
            tasks = label_studio_tasks(ordered, annotator, export)
            (tmp / "label-studio" / f"{annotator}.json").write_text(
                json.dumps(tasks, ensure_ascii=False, indent=1)
            )
        written = sorted(path.relative_to(tmp) for path in tmp.rglob("*") if path.is_file())
    return [out / path for path in written]
