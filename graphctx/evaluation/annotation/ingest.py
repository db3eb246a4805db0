"""Ratings read back from the annotation tools and checked against the export's key (``graphctx annotate
import``).

Every rated example must come from one of the given exports (its fingerprint), show an item of that export's
key and name one of its annotators; each annotator rates each item of their site exactly once, on 1–5.
Anything else is refused in one line naming the file and the example.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphctx.errors import ConfigError, DataError
from graphctx.evaluation.annotation.export import KEY_FILE
from graphctx.evaluation.annotation.formats import SCALE, Rated, read_ratings


@dataclass(frozen=True)
class Key:
    """An export's private key: its fingerprint, site, variants, annotators and items."""

    path: Path
    fingerprint: str
    site: str
    variants: tuple[str, ...]
    annotators: tuple[str, ...]
    items: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Rating:
    """One annotator's rating of one item, with what the key says the item is."""

    site: str
    annotator: str
    item: str
    question_id: int
    source: str
    rating: int


def read_key(path: Path) -> Key:
    """The key at ``path``: an export folder or its ``key.json``."""
    path = Path(path)
    path = path / KEY_FILE if path.is_dir() else path
    if not path.is_file():
        raise ConfigError(f"--key {path}: no such key file; pass the export folder or its {KEY_FILE}")
    try:
        raw = json.loads(path.read_text())
        return Key(
            path,
            raw["fingerprint"],
            raw["site"],
            tuple(raw["variants"]),
            tuple(raw["annotators"]),
            {item: dict(value) for item, value in raw["items"].items()},
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
        keys[key.fingerprint] = key
    return keys


def _rating(rated: Rated, keys: dict[str, Key]) -> Rating | None:
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


def _check_complete(ratings: Sequence[Rating], keys: dict[str, Key]) -> None:
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


def collect_ratings(files: Sequence[Path], keys: dict[str, Key]) -> list[Rating]:
    """Every rating of ``files`` (Doccano or Label Studio exports), checked against ``keys``: each from a
    given export, in range, once per annotator and item, and complete."""
    ratings: list[Rating] = []
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
