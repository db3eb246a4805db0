"""The temporal split's settings checked: date ranges or fractions (no heavy import, so that a config is
checked fast; :mod:`graphctx.data.build` splits by them)."""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise

from graphctx.data.dates import parse_created
from graphctx.data.settings import SplitSettings
from graphctx.errors import ConfigError

SPLITS = ("train", "validation", "test")
DATE_KEYS = tuple(f"{name}_{side}" for name in SPLITS for side in ("start", "end"))
FRACTION_KEYS = tuple(f"{name}_fraction" for name in SPLITS)


def split_ranges(split: SplitSettings) -> dict[str, tuple[datetime, datetime]] | None:
    """Half-open ``[start, end)`` datetime ranges per split when dates are set, else ``None`` (the split is
    by fractions, which are checked: each in ``(0, 1]``, summing to 1).

    Dates are checked: all six set, each bound a date, each range not reversed, no two ranges overlapping
    (gaps are allowed: their questions count as outside_split_ranges).
    """
    set_keys = [key for key in DATE_KEYS if getattr(split, key) is not None]
    if not set_keys:
        _check_fractions(split)
        return None
    if len(set_keys) < len(DATE_KEYS):
        missing = ", ".join(f"data.dataset.split.{key}" for key in DATE_KEYS if key not in set_keys)
        raise ConfigError(
            f"{missing}: not set; a split by dates needs all six bounds (or none: split by fractions)"
        )
    ranges = {}
    for name in SPLITS:
        bounds = []
        for side in ("start", "end"):
            value = getattr(split, f"{name}_{side}")
            try:
                if not isinstance(value, str):
                    raise ValueError(f"expected an ISO 8601 date string, got {type(value).__name__}")
                bounds.append(parse_created(value))
            except ValueError as exc:
                raise ConfigError(f"data.dataset.split.{name}_{side}: {value!r}: {exc}") from exc
        if bounds[0] >= bounds[1]:
            raise ConfigError(
                f"data.dataset.split.{name}_start ({getattr(split, f'{name}_start')}) is not before "
                f"data.dataset.split.{name}_end ({getattr(split, f'{name}_end')}): "
                "the range is reversed or empty"
            )
        ranges[name] = (bounds[0], bounds[1])
    ordered = sorted(ranges, key=lambda name: ranges[name][0])
    for first, second in pairwise(ordered):
        if ranges[first][1] > ranges[second][0]:
            raise ConfigError(
                f"data.dataset.split.{first}_end ({getattr(split, f'{first}_end')}) is after "
                f"data.dataset.split.{second}_start ({getattr(split, f'{second}_start')}): "
                "the split ranges overlap"
            )
    return ranges


def _check_fractions(split: SplitSettings) -> None:
    for key in FRACTION_KEYS:
        value = getattr(split, key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
            raise ConfigError(f"data.dataset.split.{key}: {value!r}: must be a number in (0, 1]")
    total = sum(getattr(split, key) for key in FRACTION_KEYS)
    if abs(total - 1) > 1e-9:
        raise ConfigError(
            f"data.dataset.split.{'/'.join(FRACTION_KEYS)}: "
            f"{'/'.join(str(getattr(split, key)) for key in FRACTION_KEYS)} sum to {total:g}, not 1"
        )
