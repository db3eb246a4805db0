"""Creation dates: parsed strictly into timezone-aware datetimes, stored as one sortable ISO form.

Accepted: ISO 8601 calendar dates in extended form, with or without zero padding, with an optional time after
``T`` or a space (``2021-5-1``, ``2021-05-01 10:00``, ``2021-5-1T10:00:00.553``, ``…Z``, ``…+02:00``); in
tables also integers of epoch seconds or milliseconds (an absolute value of 10^11 or more is milliseconds:
10^11 seconds is the year 5138), and datetime values (Parquet timestamps). A time without a zone is UTC
(Stack Exchange dumps are). Anything else (``06/01/2021``, ``20211015``, ``next year``) raises ``ValueError``.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone

_ISO = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})"
    r"(?:[T ](?P<hour>\d{1,2}):(?P<minute>\d{1,2})(?::(?P<second>\d{1,2})(?:[.,](?P<fraction>\d+))?)?)?"
    r"\s*(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?"
)
EPOCH_MS_FROM = 10**11
"""Integers at least this large (in absolute value) are epoch milliseconds, smaller ones epoch seconds."""


def parse_created(value: object) -> datetime:
    """``value`` as a timezone-aware datetime; ``ValueError`` saying what was expected otherwise."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value / 1000 if abs(value) >= EPOCH_MS_FROM else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError(f"epoch time {value} is out of range") from exc
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO 8601 date or epoch seconds/ms, got {type(value).__name__}")
    match = _ISO.fullmatch(value.strip())
    if match is None:
        raise ValueError("not an ISO 8601 date (YYYY-MM-DD, optionally with a time after T or a space)")
    parts = match.groupdict()
    fraction = (parts["fraction"] or "0")[:6].ljust(6, "0")
    try:
        return datetime(
            int(parts["year"]),
            int(parts["month"]),
            int(parts["day"]),
            int(parts["hour"] or 0),
            int(parts["minute"] or 0),
            int(parts["second"] or 0),
            int(fraction),
            tzinfo=_zone(parts["zone"]),
        )
    except ValueError as exc:
        raise ValueError(f"not a valid date: {exc}") from exc


def _zone(text: str | None) -> timezone:
    if text is None or text == "Z":
        return UTC
    digits = text[1:].replace(":", "")
    offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
    return timezone(-offset if text[0] == "-" else offset)


def canonical(moment: datetime) -> str:
    """The stored form: UTC, fixed width (``2021-05-01T10:00:00.000000+00:00``), so strings sort as time."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")
