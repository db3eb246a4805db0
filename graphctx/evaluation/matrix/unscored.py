"""Plug-in metrics that scored no row: a warning line per variant and score key whose every row is NaN.

A plug-in metric's NaN means "not scored" (results.md shows n/a), so NaN on every answered row of a variant
is most likely a plug-in that fails quietly; evaluate.py says so instead of leaving an n/a column unexplained.
"""

from __future__ import annotations

from collections.abc import Sequence

from graphctx.evaluation.matrix.table import ResultsTable
from graphctx.metrics.registry import MetricEntry, RowMetric
from graphctx.plugins import plugin_name


def unscored_warnings(table: ResultsTable, entries: Sequence[MetricEntry]) -> list[str]:
    """``warning: ...`` for each (variant, score key of a :class:`RowMetric` plug-in) with answered rows and
    no scored one."""
    owners = {key: entry for entry in entries if isinstance(entry, RowMetric) for key in entry.columns}
    return [
        f"warning: evaluation.metrics.extra {plugin_name(owners[key])}: {key} is NaN (not scored) on every "
        f"one of the {row.answered} rows of {row.variant.name}"
        for row in table.rows
        for key in table.keys
        if key in owners and row.answered and row.intervals[key].n == 0
    ]
