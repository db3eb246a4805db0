"""The attributions of a prediction line, as the human AIS export reads them (one reader, one place).

evaluate.py's prediction lines carry ``attributions``: one entry per configured attribution architecture
(Attributed QA, Bohnet et al. 2022: retrieve-then-read, post-hoc retrieval, AutoAIS reranking), each
``{"architecture", "passage" (corpus id, e.g. "post:123"), "link" (or null), "text", "probability" (the
judge's P(entail) of passage → answer, or null), "judge_in_system"}``. AutoAIS of an attribution is
``1[probability ≥ 0.5]``, as the paper scores it; none where the judge chose the passage (the paper reports
human AIS only for those systems).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from graphctx.errors import DataError

FIELD = "attributions"
"""The prediction line's key of its attributions."""

AUTOAIS_THRESHOLD = 0.5
"""AutoAIS says "attributable" when P(entail) ≥ this (Attributed QA's ratings.csv: Y when the NLI score is
above 0.5; a score of exactly 0.5 counts as attributable here, as the attribution stage scores it)."""


@dataclass(frozen=True)
class Attribution:
    """One (answer, attribution) pair's attribution: a passage of the attribution corpus."""

    architecture: str
    passage: str | None
    link: str | None
    text: str
    probability: float | None
    judge_in_system: bool

    @property
    def autoais(self) -> float | None:
        """1.0 (attributable) or 0.0 by the judge's probability; None when the judge chose the passage
        (``judge_in_system``) or gave no probability."""
        if self.judge_in_system or self.probability is None:
            return None
        return float(self.probability >= AUTOAIS_THRESHOLD)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _typed(entry: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    value = entry.get(key)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise DataError(f"{where}: {key!r} is {value!r}, not {' or '.join(k.__name__ for k in kinds)}")
    return value


def attribution(entry: Any, where: str) -> Attribution:
    """One entry of ``attributions`` checked against the contract above."""
    if not isinstance(entry, Mapping):
        raise DataError(f"{where}: an attribution is {entry!r}, not an object")
    probability = _typed(entry, "probability", (int, float, type(None)), where)
    if probability is not None and math.isnan(probability):
        probability = None  # evaluate.py writes a score it could not compute as NaN
    if probability is not None and not 0.0 <= probability <= 1.0:
        raise DataError(f"{where}: 'probability' {probability!r} is not in [0, 1]")
    return Attribution(
        architecture=_typed(entry, "architecture", (str,), where),
        passage=_typed(entry, "passage", (str, type(None)), where),
        link=_typed(entry, "link", (str, type(None)), where),
        text=_typed(entry, "text", (str,), where),
        probability=None if probability is None else float(probability),
        judge_in_system=_typed(entry, "judge_in_system", (bool,), where),
    )


def read_attributions(row: Mapping[str, Any], where: str) -> list[Attribution]:
    """The attributions of prediction line ``row`` (``where`` names it in errors): one per architecture."""
    entries = row.get(FIELD)
    if entries is None:
        raise DataError(
            f"{where}: no {FIELD!r}: the run attributed no answer (configure evaluation.attribution and "
            "rerun evaluate.py); an AIS export rates answers with their attributions"
        )
    if not isinstance(entries, list) or not entries:
        raise DataError(f"{where}: {FIELD!r} is {entries!r}, not a non-empty list of attributions")
    found = [attribution(entry, f"{where}: {FIELD}[{i}]") for i, entry in enumerate(entries)]
    names = [a.architecture for a in found]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise DataError(f"{where}: architecture {twice!r} attributes the answer twice")
    return found
