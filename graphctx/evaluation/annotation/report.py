"""Figure 3 written out: ``human_eval.md``, ``human_eval.csv``, ``human_eval.json`` (one line) and
``figure3.png`` (left: the share of each rating per site and source; right: each variant's win rate
against gold per site, with its 95% interval, beside the 50% line).

The paper draws the distribution as a two-ring pie per site; stacked bars show the same shares and let
sources be compared side by side.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from graphctx.cache import atomic_path
from graphctx.evaluation.annotation.ratings import RATINGS, SiteRatings

COLORS = ("#d7191c", "#fdae61", "#a6a6a6", "#a6d96a", "#1a9641")
"""One color per rating 1..5 (red: unhelpful, green: exemplary)."""


def _number(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def summary(sites: Sequence[SiteRatings]) -> dict[str, Any]:
    """The figures as one JSON object, by site."""
    return {
        site.site: {
            "annotators": site.annotators,
            "questions": site.questions,
            "krippendorff_alpha_ordinal": _number(site.alpha),
            "distribution": site.distribution,
            "win_rate": {
                variant: {
                    "rate": _number(w.mean),
                    "low": _number(w.low),
                    "high": _number(w.high),
                    "questions": w.n,
                }
                for variant, w in site.win_rates.items()
            },
        }
        for site in sites
    }


def markdown(sites: Sequence[SiteRatings]) -> str:
    """One section per site: the rating counts per source, the win rates, the agreement."""
    lines = ["# Human evaluation (Figure 3)", ""]
    for site in sites:
        alpha = "n/a (every rating equal)" if math.isnan(site.alpha) else f"{site.alpha:.3f}"
        lines += [
            f"## {site.site}",
            "",
            f"{site.questions} questions, {site.annotators} annotators; "
            f"Krippendorff's alpha (ordinal) {alpha}.",
            "",
            "| source | " + " | ".join(map(str, RATINGS)) + " | mean |",
            "|---" * (len(RATINGS) + 2) + "|",
        ]
        for source, counts in site.distribution.items():
            mean = sum(k * c for k, c in zip(RATINGS, counts, strict=True)) / max(sum(counts), 1)
            lines.append(f"| {source} | " + " | ".join(map(str, counts)) + f" | {mean:.2f} |")
        lines += ["", "| variant | win rate vs gold | 95% interval |", "|---|---|---|"]
        for variant, w in site.win_rates.items():
            lines.append(f"| {variant} | {w.mean:.1%} | [{w.low:.1%}, {w.high:.1%}] |")
        lines.append("")
    lines.append(
        "Win: rated above the gold answer by the same annotator; a tie counts half. Interval: percentile"
    )
    lines.append("bootstrap over questions.")
    return "\n".join(lines) + "\n"


def table(sites: Sequence[SiteRatings]) -> str:
    """Long CSV: one row per (site, source, rating) count and per (site, variant) win rate, one per alpha."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["site", "measure", "source", "rating", "value", "low", "high", "n"])
    for site in sites:
        for source, counts in site.distribution.items():
            for rating, count in zip(RATINGS, counts, strict=True):
                writer.writerow([site.site, "count", source, rating, count, "", "", sum(counts)])
        for variant, w in site.win_rates.items():
            writer.writerow([site.site, "win_rate", variant, "", w.mean, w.low, w.high, w.n])
        writer.writerow(
            [site.site, "krippendorff_alpha_ordinal", "", "", site.alpha, "", "", site.annotators]
        )
    return out.getvalue()


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure(sites: Sequence[SiteRatings]) -> bytes:
    """Figure 3 as PNG bytes."""
    plt = pyplot()
    bars = [(site.site, source, counts) for site in sites for source, counts in site.distribution.items()]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, max(3.0, 1.5 + 0.35 * len(bars))))
    for y, (_, _, counts) in enumerate(bars):
        start = 0.0
        for rating, count, color in zip(RATINGS, counts, COLORS, strict=True):
            share = count / max(sum(counts), 1)
            left.barh(y, share, left=start, color=color, label=str(rating) if y == 0 else None)
            start += share
    left.set_yticks(range(len(bars)), [f"{site} · {source}" for site, source, _ in bars])
    left.invert_yaxis()
    left.set_xlabel("share of ratings")
    left.legend(title="rating", ncols=5, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    wins = [(site.site, variant, w) for site in sites for variant, w in site.win_rates.items()]
    for x, (_, _, w) in enumerate(wins):
        right.bar(x, w.mean, color="#4575b4")
        right.errorbar(x, w.mean, yerr=[[w.mean - w.low], [w.high - w.mean]], color="black", capsize=4)
    right.axhline(0.5, color="#d7191c", linestyle="--", label="50%")
    right.set_xticks(range(len(wins)), [f"{site}\n{variant}" for site, variant, _ in wins], fontsize=8)
    right.set_ylim(0, 1)
    right.set_ylabel("win rate vs gold (tie: half)")
    right.legend(frameon=False)
    return png_bytes(fig)


def png_bytes(fig: Any) -> bytes:
    """A matplotlib figure laid out tightly as PNG bytes (120 dpi), then closed."""
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    pyplot().close(fig)
    return buffer.getvalue()


def write_report(sites: Sequence[SiteRatings], out: Path) -> dict[str, Path]:
    """Write the four files into ``out`` (all rendered before the first is written); returns them by kind."""
    return write_files(
        {
            "markdown": ("human_eval.md", markdown(sites).encode()),
            "csv": ("human_eval.csv", table(sites).encode()),
            "json": ("human_eval.json", (json.dumps(summary(sites)) + "\n").encode()),
            "figure": ("figure3.png", figure(sites)),
        },
        out,
    )


def write_files(rendered: dict[str, tuple[str, bytes]], out: Path) -> dict[str, Path]:
    """Write each rendered file (kind -> (name, bytes)) into ``out``, each whole or not at all; returns
    the paths by kind."""
    paths = {}
    for kind, (name, data) in rendered.items():
        with atomic_path(Path(out) / name) as tmp:
            tmp.write_bytes(data)
        paths[kind] = Path(out) / name
    return paths
