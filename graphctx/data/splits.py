"""Which split a question belongs to: half-open date ranges per split, checked (:func:`split_ranges`), or
cuts of the sorted creation times at the configured fractions (:func:`fraction_cuts`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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

    Dates are checked: all six set, each bound a date, each range not reversed, no two ranges overlapping,
    and the ranges in time order train → validation → test (gaps are allowed: their questions count as
    outside_split_ranges).
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
    if ordered != list(SPLITS):
        raise ConfigError(
            "data.dataset.split: the date ranges run "
            + " → ".join(f"{name} ({getattr(split, f'{name}_start')})" for name in ordered)
            + "; they must run train → validation → test (the pool is older than the questions it answers)"
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


def fraction_cuts(created: list[datetime], split: SplitSettings) -> dict[str, tuple[datetime, datetime]]:
    """Half-open ranges that cut the sorted creation times ``created`` at the configured fractions:
    ``b_1 = t[round(n f_train)]``, ``b_2 = t[round(n (f_train + f_val))]``; train ``[t_0, b_1)``,
    validation ``[b_1, b_2)``, test ``[b_2, t_{n-1}]`` (an end past the newest question)."""
    n = len(created)
    first = created[0] if created else datetime.min.replace(tzinfo=UTC)
    past_last = (created[-1] if created else first) + timedelta(microseconds=1)

    def cut(share: float) -> datetime:
        index = round(n * share)
        return created[index] if index < n else past_last

    first_cut = cut(split.train_fraction)
    second_cut = max(first_cut, cut(split.train_fraction + split.validation_fraction))
    return {
        "train": (first, first_cut),
        "validation": (first_cut, second_cut),
        "test": (second_cut, past_last),
    }
