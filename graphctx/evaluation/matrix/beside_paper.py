"""``results.md``'s "Beside the paper" section: each variant's value next to the paper's published one.

For a site the paper has figures for (:data:`graphctx.paper_figures.SITES`, from ``data.dataset.site``, or
the dump folder's name), the variants are laid out as the rows of the paper's Table 3 (``FineTuned`` is
its "FineTuned Gen Zero-Shot" row, the ``Base-*`` variants its "[w/o INST]" rows; ``ZeroShot`` is compared
with Table 2's Llama-2-13B zero-shot figures). Each cell shows our mean with its 95% bootstrap interval,
the paper's value, and whether the interval contains it.

Four things make a cell not like for like, and the section says so: the paper's LLM rows answer with
Llama-2-13B (a run on another model is marked), a score labelled with its stand-in scorer (the keys
``bertscore_f1[...]``, ``fact_score[...]``) is not the paper's scorer, and a metric setting that differs
from the paper's (:func:`graphctx.metrics.paper_settings.unlike_paper`, e.g. a stemmed ROUGE) marks its
cells and every row. A pre-LLM baseline row whose baseline runs stand-ins for its authors' components
(:data:`graphctx.baselines.STAND_INS`) is marked with them, spelled out below the table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from graphctx.baselines import STAND_INS, substitutions
from graphctx.evaluation.matrix.table import ResultsTable, metric_key
from graphctx.metrics.registry import built_in_classes, paper_columns
from graphctx.paper import Reference, display_name, is_reference
from graphctx.paper_figures import TABLE3_MODEL, TABLE3_PRE_LLM, Figure, paper_site, published

PAPER_ROWS: dict[str, str] = {
    "ZeroShot": "Zero-shot",
    "Base-TextGen": "[w/o INST]TextGen",
    "Base-TextContextGen": "[w/o INST]TextContextGen",
    "Base-GraphGen": "[w/o INST]GraphGen",
    "Base-GraphContextGen": "[w/o INST]GraphContextGen",
    "FineTuned": "FineTuned Gen Zero-Shot",
    "TextGen": "TextGen",
    "TextContextGen": "TextContextGen",
    "GraphGen": "GraphGen",
    "GraphContextGen": "GraphContextGen",
    **{name: name for name in TABLE3_PRE_LLM},
}
"""Variant name → the paper's row (Table 3's method name; ``Zero-shot``: Table 2)."""

PAPER_COLUMNS = paper_columns(built_in_classes())
"""Our score key (before any ``[label]``) → (Table 3's column, header), from the metric registry."""
COLUMNS = {key: header for key, (_, header) in PAPER_COLUMNS.items()}

LLAMA2_13B = Reference("Table 3's answering model", (TABLE3_MODEL,), (("llama", 40, 5120),))


def _cell(
    table: ResultsTable, row_index: int, base: str, figure: Figure | None, unlike: Sequence[str] = ()
) -> str:
    """``ours [low, high] · paper v · in interval yes/no``, the stand-in scorer and the settings that
    differ from the paper's named."""
    key = metric_key(table.keys, base)
    interval = table.rows[row_index].intervals.get(key) if key else None
    ours = (
        "n/a"
        if interval is None or interval.n == 0
        else f"{interval.mean:.3f} [{interval.low:.3f}, {interval.high:.3f}]"
    )
    if figure is None:
        return f"{ours} · paper —"
    text = f"{ours} · paper {figure.value:.3f}"
    if interval is not None and interval.n:
        text += " · in interval: " + ("yes" if interval.low <= figure.value <= interval.high else "no")
    if key and "[" in key:
        text += f" · stand-in scorer [{key.partition('[')[2]}, not like for like"
    if unlike:
        text += " · not like for like: " + ", ".join(unlike)
    return text


def paper_section(
    table: ResultsTable,
    site: str | None,
    answer_model: str,
    unlike: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """The section for ``site`` ('' when the paper has no figures for it); ``answer_model``: the run's
    ``model.spec.source``; ``unlike``: score key → its settings that differ from the paper's."""
    unlike = {base: list(unlike[base]) for base in COLUMNS if unlike and unlike.get(base)}
    paper = paper_site(site)
    if paper is None:
        return ""
    like_model = is_reference(LLAMA2_13B, answer_model)
    lines = [
        f"## Beside the paper (Table 3, {paper})",
        "",
        "Ours: mean [95% bootstrap interval]; paper: Banerjee et al. 2024 (arXiv 2401.12671v3), Table 3 "
        "(Zero-shot: Table 2, Llama-2-13B); in interval: whether our interval contains the paper's value.",
    ]
    if not like_model:
        lines += [
            "",
            f"Not like for like: the LLM rows here answer with {display_name(answer_model)}; the paper's "
            "LLM rows answer with Llama-2-13B.",
        ]
    settings = sorted({item.partition("=")[0] for items in unlike.values() for item in items})
    for item in sorted({item for items in unlike.values() for item in items}):
        columns = ", ".join(COLUMNS[base] for base in COLUMNS if item in unlike.get(base, ()))
        lines += ["", f"Not like for like: {columns} computed with {item}."]
    lines += ["", "| Paper row | Variant | " + " | ".join(COLUMNS.values()) + " |"]
    lines.append("|---" * (len(COLUMNS) + 2) + "|")
    missing, substituted = [], []
    for index, row in enumerate(table.rows):
        method = PAPER_ROWS.get(row.variant.name)
        if method is None:
            missing.append(row.variant.label)
            continue
        figures = {base: published(method, paper, PAPER_COLUMNS[base][0]) for base in COLUMNS}
        llm_row = method not in TABLE3_PRE_LLM
        marks = ([] if like_model or not llm_row else ["model"]) + settings
        if not llm_row and row.variant.name in STAND_INS and substitutions(row.variant.name):
            marks.append("stand-ins for " + ", ".join(STAND_INS[row.variant.name]))
            substituted.append(row.variant.name)
        name = method + (f" (not like for like: {', '.join(marks)})" if marks else "")
        cells = [_cell(table, index, base, figures[base], unlike.get(base, ())) for base in COLUMNS]
        lines.append(f"| {name} | {row.variant.label} | " + " | ".join(cells) + " |")
    if missing:
        lines += ["", "No published figures for: " + ", ".join(missing) + "."]
    for name in substituted:
        lines += ["", f"Not like for like: {name} runs in place of its authors' {substitutions(name)}."]
    return "\n".join(lines) + "\n"
