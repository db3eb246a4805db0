"""results.md's Attribution section: AutoAIS on each variant's chosen attributions, per architecture.

A row's AutoAIS on its attribution is 1 when the judge's P(entail) of passage → answer is ≥ 0.5
(:data:`~graphctx.evaluation.attribution.attributor.THRESHOLD`), else 0; a row whose attribution was not
judged (no passage: no entry on its line; or over the judge's input limit) is left out of the mean, and
coverage = judged rows / rows. The mean has a percentile bootstrap 95% interval, as the results table's.
``autoais_rerank`` rows (the judge chose the passage) report no AutoAIS, as Bohnet et al. prescribe. A row
an architecture left unattributed although it had an answer (``unattributed``: e.g. ``rtr``'s marks all
naming a missing passage) is judged 0, and the Unattributed column counts them by reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from graphctx.evaluation.attribution.architectures import Architecture
from graphctx.evaluation.attribution.attributor import THRESHOLD, configured, judge_name
from graphctx.evaluation.jsonl import RecordFile
from graphctx.metrics.stats import bootstrap_interval

JUDGE_IN_SYSTEM = "judge in system: AutoAIS not reported"


def attributable(lines: Sequence[Mapping[str, Any]], architecture: str) -> np.ndarray:
    """Per line, AutoAIS on its ``architecture`` attribution: 1/0, NaN when not judged or absent."""
    values = []
    for line in lines:
        found = next((a for a in line.get("attributions") or () if a["architecture"] == architecture), None)
        p = None if found is None else found["probability"]
        values.append(np.nan if p is None else float(p >= THRESHOLD))
    return np.array(values, dtype=float)


def unattributed(lines: Sequence[Mapping[str, Any]], architecture: str) -> str:
    """The lines ``architecture`` left unattributed, counted by reason (``"2 citation mark names no
    passage"``; ``"0"`` when none)."""
    reasons = Counter(
        found["unattributed"]
        for line in lines
        for found in line.get("attributions") or ()
        if found["architecture"] == architecture and found.get("unattributed")
    )
    return "; ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())) or "0"


def attribution_section(
    lines: Mapping[str, Sequence[Mapping[str, Any]]],
    chosen: Sequence[Architecture],
    judge: str,
    samples: int,
    seed: int,
) -> str:
    """The Markdown section over ``lines`` (variant label → its requested prediction lines); ``judge``:
    the judge's name and stand-in label, as results.md's model lines give it."""
    out = [
        "## Attribution",
        "",
        f"AutoAIS on each answer's one attribution (Bohnet et al., 2022): premise = the passage, judged by "
        f"{judge}; attributable when P(entail) ≥ {THRESHOLD}; coverage = judged rows / rows (not judged: "
        "no passage, or over the judge's input limit). The architectures:",
        "",
        *(f"- `{a.name}`: {a.rule()}" for a in chosen),
        "",
        "| Variant | Architecture | AutoAIS on the attribution | 95% CI | Coverage | Unattributed |",
        "|---|---|---|---|---|---|",
    ]
    for label, variant_lines in lines.items():
        for a in chosen:
            values = attributable(variant_lines, a.name)
            judged = int(np.sum(~np.isnan(values)))
            coverage = f"{judged}/{len(values)}"
            missing = unattributed(variant_lines, a.name)
            if a.judge_in_system:
                out.append(f"| {label} | {a.name} | {JUDGE_IN_SYSTEM} | | {coverage} | {missing} |")
                continue
            interval = bootstrap_interval(values, n_resamples=samples, seed=seed)
            if interval.n == 0:
                out.append(f"| {label} | {a.name} | n/a | | {coverage} | {missing} |")
                continue
            ci = f"[{interval.low:.4f}, {interval.high:.4f}]"
            out.append(f"| {label} | {a.name} | {interval.mean:.4f} | {ci} | {coverage} | {missing} |")
    return "\n".join(out) + "\n"


def run_section(config: Any, predictions: Mapping[str, Path], ids: Sequence[int]) -> str:
    """The section of an evaluation run (``predictions``: variant label → its predictions file; ``ids``:
    the requested rows); ``""`` when ``evaluation.attribution`` is empty."""
    chosen = configured(config)
    if not chosen:
        return ""
    lines = {}
    for label, path in predictions.items():
        by_id = RecordFile(path).records
        lines[label] = [by_id[i] for i in ids if i in by_id]
    settings = config.evaluation
    judge = judge_name(settings.metrics.autoais)
    return attribution_section(lines, chosen, judge, settings.bootstrap_samples, settings.seed)
