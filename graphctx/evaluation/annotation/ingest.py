"""Ratings read back from the annotation tools and checked against the export's key (``graphctx annotate
import``).

Every rated example must come from one of the given exports (its fingerprint), show an item of that export's
key and name one of its annotators; each annotator rates each item of their site exactly once, on 1–5
(or, for an AIS export, with one AIS judgment). Anything else is refused in one line naming the file and the
example. The keys given to one import are of one task.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphctx.errors import ConfigError, DataError
from graphctx.evaluation.annotation.ais_form import Judgment, judgment
from graphctx.evaluation.annotation.attributions import Attribution, attribution
from graphctx.evaluation.annotation.export import KEY_FILE
from graphctx.evaluation.annotation.formats import AIS, HELPFULNESS, SCALE, TASKS, Rated, read_ratings


@dataclass(frozen=True)
class Key:
    """An export's private key: its fingerprint, site, variants, annotators and items (and, of an AIS
    export, each item's attribution)."""

    path: Path
    fingerprint: str
    site: str
    variants: tuple[str, ...]
    annotators: tuple[str, ...]
    items: dict[str, dict[str, Any]]
    task: str = HELPFULNESS
    attributions: dict[str, Attribution] | None = None


@dataclass(frozen=True)
class Rating:
    """One annotator's rating of one item, with what the key says the item is."""

    site: str
    annotator: str
    item: str
    question_id: int
    source: str
    rating: int


@dataclass(frozen=True)
class AisRating:
    """One annotator's AIS judgment of one item, with the item's variant (``source``) and attribution."""

    site: str
    annotator: str
    item: str
    question_id: int
    source: str
    attribution: Attribution
    judgment: Judgment


def read_key(path: Path) -> Key:
    """The key at ``path``: an export folder or its ``key.json``."""
    path = Path(path)
    path = path / KEY_FILE if path.is_dir() else path
    if not path.is_file():
        raise ConfigError(f"--key {path}: no such key file; pass the export folder or its {KEY_FILE}")
    try:
        raw = json.loads(path.read_text())
        task = raw.get("task", HELPFULNESS)  # keys written before AIS exports have no task
        items = {item: dict(value) for item, value in raw["items"].items()}
        if task not in TASKS:
            raise DataError(f"{path}: task {task!r} is not one of {list(TASKS)}")
        attributions = None
        if task == AIS:
            attributions = {i: attribution(e["attribution"], f"{path}: item {i}") for i, e in items.items()}
        return Key(
            path,
            raw["fingerprint"],
            raw["site"],
            tuple(raw["variants"]),
            tuple(raw["annotators"]),
            items,
            task,
            attributions,
        )
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
        raise DataError(f"{path}: not a key file of `graphctx annotate export` ({error!r})") from error


def read_keys(paths: Sequence[Path]) -> dict[str, Key]:
    """The keys by fingerprint; two keys of one site (or the same key twice) are refused."""
    keys: dict[str, Key] = {}
    for key in map(read_key, paths):
        other = keys.get(key.fingerprint) or next((k for k in keys.values() if k.site == key.site), None)
        if other:
            raise ConfigError(f"--key {key.path}: site {key.site!r} is already given by {other.path}")
        first = next(iter(keys.values()), key)
        if key.task != first.task:
            raise ConfigError(
                f"--key {key.path}: its task is {key.task!r}, that of {first.path} {first.task!r}; import "
                "one task at a time"
            )
        keys[key.fingerprint] = key
    return keys


def _rating(rated: Rated, keys: dict[str, Key]) -> Rating | AisRating | None:
    """``rated`` checked against its key; None when it is not rated (yet)."""
    key = keys.get(rated.export)
    if key is None:
        given = ", ".join(f"{k.site} {k.fingerprint[:8]}" for k in keys.values())
        raise DataError(
            f"{rated.where}: item {rated.item} is from another export ({rated.export[:8]}), not from the "
            f"keys given ({given}); pass the key.json of the export it was rated from"
        )
    if rated.item not in key.items:
        raise DataError(f"{rated.where}: item {rated.item} is not in {key.path} (edited by hand?)")
    if rated.annotator not in key.annotators:
        raise DataError(f"{rated.where}: annotator {rated.annotator!r} is not one of {list(key.annotators)}")
    if key.task == AIS:
        return _ais_rating(rated, key)
    if len(rated.labels) > 1:
        raise DataError(
            f"{rated.where}: item {rated.item} is rated {len(rated.labels)} times {list(rated.labels)}"
        )
    if not rated.labels:
        return None
    if rated.labels[0] not in SCALE:
        raise DataError(f"{rated.where}: item {rated.item}: rating {rated.labels[0]!r} is outside 1–5")
    entry = key.items[rated.item]
    return Rating(
        key.site,
        rated.annotator,
        rated.item,
        int(entry["question_id"]),
        entry["source"],
        int(rated.labels[0]),
    )


def _ais_rating(rated: Rated, key: Key) -> AisRating | None:
    """``rated``'s AIS judgment (of an item of ``key``, an AIS export); None when it is not judged (yet)."""
    try:
        found = judgment(rated.labels)
    except ValueError as error:
        raise DataError(f"{rated.where}: item {rated.item}: {error}") from error
    if found is None:
        return None
    entry, attributions = key.items[rated.item], key.attributions or {}  # read_key reads an AIS key's
    return AisRating(
        key.site,
        rated.annotator,
        rated.item,
        int(entry["question_id"]),
        entry["source"],
        attributions[rated.item],
        found,
    )


def _check_complete(ratings: Sequence[Rating | AisRating], keys: dict[str, Key]) -> None:
    """Each annotator of each key rated every one of its items."""
    for key in keys.values():
        for annotator in key.annotators:
            done = {r.item for r in ratings if r.site == key.site and r.annotator == annotator}
            missing = sorted(set(key.items) - done)
            if missing:
                raise DataError(
                    f"{key.path}: annotator {annotator!r} rated {len(done)} of {len(key.items)} items (first "
                    f"missing: {missing[0]}); import every annotator's finished export"
                )


def collect_ratings(files: Sequence[Path], keys: dict[str, Key]) -> list[Rating | AisRating]:
    """Every rating of ``files`` (Doccano or Label Studio exports), checked against ``keys``: each from a
    given export, in range, once per annotator and item, and complete (of AIS keys: :class:`AisRating`)."""
    ratings: list[Rating | AisRating] = []
    seen: dict[tuple[str, str, str], str] = {}
    for rated in (rated for path in files for rated in read_ratings(Path(path))):
        rating = _rating(rated, keys)
        if rating is None:
            continue
        place = (rated.export, rated.annotator, rated.item)
        if place in seen:
            raise DataError(
                f"{rated.where}: annotator {rated.annotator!r} rated item {rated.item} again "
                f"(first: {seen[place]})"
            )
        seen[place] = rated.where
        ratings.append(rating)
    _check_complete(ratings, keys)
    return ratings
