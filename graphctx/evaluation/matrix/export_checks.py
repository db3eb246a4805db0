"""What ``graphctx export`` checks before it trusts a run folder: every answer has its joined scores, and the
results.md it would put in the card is the one these scores make.

A run writes ``scores/<variant>.jsonl`` (every metric's scores of each row, joined) and ``results.md`` as its
last step, so a run killed before it ends has answers without joined scores (refused: exporting it would give
a dataset with no score columns), and a results.md left by an earlier run describes other rows. results.md is
backed when, for every variant, its row of the means table exists and each cell ``mean [low, high] (n=N)``
equals, to its four decimals, the mean of the finite values of one score key of the joined scores over
``N`` rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from graphctx.errors import DataError

CELL = re.compile(r"(-?\d+\.\d{4}) \[[^\]]*\] \(n=(\d+)\)")
"""A means-table cell of results.md (:func:`graphctx.evaluation.matrix.table.to_markdown`)."""


def check_scored(run: Path, variant: str, answered: Sequence[int], scores: Mapping[int, Any]) -> None:
    """A one-line ``DataError`` when answers of ``variant`` have no joined scores (a run that did not end)."""
    missing = [i for i in answered if i not in scores]
    if not missing:
        return
    joined = run / "scores" / f"{variant}.jsonl"
    what = "no joined scores file" if not joined.is_file() else f"no scores for {len(missing)} of them"
    raise DataError(
        f"--run {run}: {variant} has {len(answered)} answers and {what} ({joined}): the run did not finish; "
        "rerun evaluate.py with its config to score them, then export"
    )


def summaries(scores: Mapping[int, Mapping[str, Any]]) -> set[tuple[str, int]]:
    """``(mean to four decimals, n)`` of each score key's finite values over the rows."""
    values: dict[str, list[float]] = {}
    for row in scores.values():
        for key, value in row.items():
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if key != "id" and number and math.isfinite(value):
                values.setdefault(key, []).append(float(value))
    return {(f"{sum(v) / len(v):.4f}", len(v)) for v in values.values() if v}


def unbacked(results: str, labels: Mapping[str, str], scores: Mapping[str, Mapping[int, Any]]) -> str | None:
    """Why ``results`` (results.md's text) is not the table of ``scores`` (variant → joined scores by id;
    ``labels``: variant → its label in the table), or None when it is."""
    table = results.split("\n\n| Variant | vs |", 1)[0]
    for variant, label in labels.items():
        row = next((line for line in table.splitlines() if line.startswith(f"| {label} | ")), None)
        if row is None:
            return f"it has no row for {variant}"
        found = summaries(scores[variant])
        for mean, n in CELL.findall(row):
            if (mean, int(n)) not in found:
                return f"its {variant} mean {mean} over {n} rows is not in scores/{variant}.jsonl"
    return None
