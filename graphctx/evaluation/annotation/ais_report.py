"""Human AIS written out: ``human_ais.md``, ``human_ais.csv``, ``human_ais.json`` (one line) and
``autoais_vs_ais.png`` (per site, each system's AutoAIS against its human AIS with the AIS interval, beside
the diagonal: Attributed QA's Figure 3)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphctx.evaluation.annotation.ais_form import ATTRIBUTABLE_QUESTION, INTERPRETABLE_QUESTION
from graphctx.evaluation.annotation.ais_ratings import SiteAis
from graphctx.evaluation.annotation.report import png_bytes, pyplot, write_files

JUDGE_NOTE = (
    "Rows marked *judge in system* had their attribution chosen by the AutoAIS judge (AutoAIS reranking): "
    "they report human AIS only and are left out of both correlations, as Attributed QA prescribes (the "
    "judge would grade its own choice)."
)


def _number(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def _shown(value: float, form: str = ".3f") -> str:
    return "n/a" if math.isnan(value) else format(value, form)


def summary(sites: Sequence[SiteAis]) -> dict[str, Any]:
    """The figures as one JSON object, by site."""
    return {
        site.site: {
            "annotators": site.annotators,
            "questions": site.questions,
            "interpretable": _number(site.interpretable),
            "krippendorff_alpha_nominal": _number(site.alpha),
            "pearson_system_level": {"r": _number(site.system_level.r), "systems": site.system_level.n},
            "pearson_instance_level": {"r": _number(site.instance_level.r), "items": site.instance_level.n},
            "systems": [
                {
                    "variant": s.variant,
                    "architecture": s.architecture,
                    "judge_in_system": s.judge_in_system,
                    "ais": _number(s.ais.mean),
                    "low": _number(s.ais.low),
                    "high": _number(s.ais.high),
                    "items": s.ais.n,
                    "autoais": _number(s.autoais),
                }
                for s in site.systems
            ],
        }
        for site in sites
    }


def markdown(sites: Sequence[SiteAis]) -> str:
    """One section per site: AIS and AutoAIS per system, the agreement and the two correlations."""
    lines = ["# Human AIS (Attributed QA)", ""]
    for site in sites:
        lines += [
            f"## {site.site}",
            "",
            f"{site.questions} questions, {site.annotators} annotators; answers judged interpretable: "
            f"{site.interpretable:.1%}; Krippendorff's alpha (nominal, AIS) {_shown(site.alpha)}.",
            "",
            f"AutoAIS vs AIS, Pearson's r: system level {_shown(site.system_level.r)} "
            f"({site.system_level.n} systems), per instance {_shown(site.instance_level.r)} "
            f"({site.instance_level.n} items).",
            "",
            "| variant | architecture | AIS | 95% interval | AutoAIS | items |",
            "|---|---|---|---|---|---|",
        ]
        for s in site.systems:
            auto = "judge in system" if s.judge_in_system else _shown(s.autoais, ".1%")
            lines.append(
                f"| {s.variant} | {s.architecture} | {s.ais.mean:.1%} | [{s.ais.low:.1%}, {s.ais.high:.1%}] "
                f"| {auto} | {s.ais.n} |"
            )
        lines.append("")
    lines += [
        f"Raters answered {INTERPRETABLE_QUESTION!r}, then, if so, {ATTRIBUTABLE_QUESTION!r} (AIS: both "
        "yes). AIS of an item: its annotators' majority (a tie counts half); interval: percentile bootstrap "
        "over items. AutoAIS: the judge's P(entail) of the attributed passage ≥ 0.5.",
        JUDGE_NOTE,
    ]
    return "\n".join(lines) + "\n"


def table(sites: Sequence[SiteAis]) -> str:
    """Long CSV: one row per (site, system) AIS and AutoAIS, one per site figure."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["site", "measure", "variant", "architecture", "value", "low", "high", "n"])
    for site in sites:
        for s in site.systems:
            writer.writerow(
                [site.site, "ais", s.variant, s.architecture, s.ais.mean, s.ais.low, s.ais.high, s.ais.n]
            )
            auto = "" if s.judge_in_system else s.autoais
            writer.writerow([site.site, "autoais", s.variant, s.architecture, auto, "", "", s.ais.n])
        writer.writerow(
            [site.site, "krippendorff_alpha_nominal", "", "", site.alpha, "", "", site.annotators]
        )
        writer.writerow(
            [site.site, "pearson_system_level", "", "", site.system_level.r, "", "", site.system_level.n]
        )
        writer.writerow(
            [
                site.site,
                "pearson_instance_level",
                "",
                "",
                site.instance_level.r,
                "",
                "",
                site.instance_level.n,
            ]
        )
    return out.getvalue()


def figure(sites: Sequence[SiteAis]) -> bytes:
    """The system-level scatter as PNG bytes: one panel per site."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(sites), figsize=(5.5 * len(sites), 5.0), squeeze=False)
    for axis, site in zip(axes[0], sites, strict=True):
        scored = [s for s in site.systems if not math.isnan(s.autoais)]
        for s in scored:
            axis.errorbar(
                s.autoais,
                s.ais.mean,
                yerr=[[s.ais.mean - s.ais.low], [s.ais.high - s.ais.mean]],
                fmt="o",
                color="#4575b4",
                capsize=3,
            )
            axis.annotate(
                f"{s.variant} · {s.architecture}",
                (s.autoais, s.ais.mean),
                fontsize=7,
                xytext=(4, 4),
                textcoords="offset points",
            )
        axis.plot([0, 1], [0, 1], color="#a6a6a6", linestyle="--", linewidth=1)
        axis.set_xlim(-0.02, 1.02)
        axis.set_ylim(-0.02, 1.02)
        axis.set_xlabel("AutoAIS")
        axis.set_ylabel("human AIS (95% interval)")
        axis.set_title(
            f"{site.site}: r = {_shown(site.system_level.r)} over {site.system_level.n} systems", fontsize=9
        )
    return png_bytes(fig)


def write_report(sites: Sequence[SiteAis], out: Path) -> dict[str, Path]:
    """Write the four files into ``out`` (all rendered before the first is written); returns them by kind."""
    return write_files(
        {
            "markdown": ("human_ais.md", markdown(sites).encode()),
            "csv": ("human_ais.csv", table(sites).encode()),
            "json": ("human_ais.json", (json.dumps(summary(sites)) + "\n").encode()),
            "figure": ("autoais_vs_ais.png", figure(sites)),
        },
        out,
    )
