"""The results table: one row per variant, each metric's mean with its bootstrap 95% interval, and a
paired permutation test of each variant against the baseline fixed for it before scoring
(``evaluation.comparisons``: each graph variant against its text twin), Holm-corrected across the table."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from graphctx.cache import atomic_path
from graphctx.evaluation_settings import TEXT_TWINS
from graphctx.metrics.registry import built_in_columns
from graphctx.metrics.rouge import evaluate_mid
from graphctx.metrics.stats import (
    Interval,
    PairedComparison,
    bootstrap_interval,
    holm,
    paired_test,
    rows_needed,
    smallest_p,
)
from graphctx.prompts import Variant
from graphctx.retrieval.graph import describe_linkage, linkage_stats

EVALUATE_MIDS = {
    "rouge1": "ROUGE-1 (bootstrap mid, as evaluate)",
    "rougeL": "ROUGE-L (bootstrap mid, as evaluate)",
}
"""Score key → the column of the value ``evaluate``'s rouge reports for it (the paper's number,
:func:`~graphctx.metrics.rouge.evaluate_mid` with ``evaluation.seed``), shown beside the mean of rows."""


def metric_key(keys: Sequence[str], base: str) -> str | None:
    """The stored key of metric ``base``: ``base`` or ``base[label]`` (``autoais[causal-lm-judge]``)."""
    for key in keys:
        if key == base or key.startswith(f"{base}["):
            return key
    return None


def column_name(key: str, columns: Mapping[str, str]) -> str:
    """Column name of a score key (``columns``: base key → name), keeping the judge label: ``autoais[x]``
    → ``AutoAIS [x]``."""
    base, _, label = key.partition("[")
    return f"{columns[base]} [{label}" if label else columns[base]


def shown_keys(keys: Sequence[str], columns: Mapping[str, str]) -> list[str]:
    """The stored keys among ``keys`` that have a column, in column order."""
    every = sorted(keys)
    return [key for base in columns if (key := metric_key(every, base)) is not None]


@dataclass
class VariantScores:
    """Per-row scores of one variant: ``scores[key][i]`` belongs to row ``ids[i]`` (NaN: not scored)."""

    variant: Variant
    ids: list[int]
    scores: dict[str, np.ndarray]
    prompts_truncated: int = 0
    """Answered rows whose prompt lost knowledge sentences or lower-ranked pairs to ``max_prompt_tokens``."""
    prompts_over_limit: int = 0
    """Answered rows whose question and top pair alone exceed ``max_prompt_tokens`` (kept whole)."""
    kg_lost_entities: int = 0
    """KG entities whose lookups failed, summed over answered rows (their facts are missing)."""
    baseline_fallbacks: int = 0
    """Baseline rows where the baseline gave up and answered with the top retrieved answer."""
    retrieval_fallbacks: list[list[bool]] = field(default_factory=list)
    """Per scored row, its hits' ``retrieval_fallback`` flags (graph variants: cosine top-ups)."""
    prompts: dict[int, str] = field(default_factory=dict)
    """Per scored row, a digest of the prompt its answer was decoded from (empty: not known)."""

    def linkage(self) -> dict[str, float] | None:
        """:func:`~graphctx.retrieval.graph.linkage_stats` of a graph variant's rows; None otherwise."""
        return linkage_stats(self.retrieval_fallbacks) if self.variant.retrieval == "graph" else None

    def autoais_coverage(self) -> tuple[int, int]:
        """(rows judged by AutoAIS, rows over the judge's input limit); (0, 0) without AutoAIS scores."""
        judged_key = metric_key(list(self.scores), "autoais")
        over_key = metric_key(list(self.scores), "autoais_over_limit")
        judged = int(np.sum(~np.isnan(self.scores[judged_key]))) if judged_key else 0
        over = int(np.nansum(self.scores[over_key])) if over_key else 0
        return judged, over

    def total(self, base: str) -> int:
        """Sum of a per-row count key (``fact_sentences_cut``) over the scored rows; 0 without it."""
        key = metric_key(list(self.scores), base)
        return int(np.nansum(self.scores[key])) if key else 0

    def aligned(self, key: str, ids: Sequence[int]) -> np.ndarray:
        """Scores of ``key`` for ``ids`` in that order (NaN where this variant has no such row)."""
        position = {row_id: i for i, row_id in enumerate(self.ids)}
        values = self.scores.get(key)
        return np.array(
            [values[position[i]] if values is not None and i in position else np.nan for i in ids],
            dtype=float,
        )


@dataclass
class TableRow:
    """One variant's line: intervals per metric key, its comparison with its baseline, and coverage."""

    variant: Variant
    intervals: dict[str, Interval]
    comparisons: dict[str, PairedComparison | None] = field(default_factory=dict)
    baseline: str | None = None
    """The variant this one is compared with (``evaluation.comparisons``); None: not compared."""
    answered: int = 0
    prompts_truncated: int = 0
    prompts_over_limit: int = 0
    autoais_judged: int = 0
    autoais_over_limit: int = 0
    kg_lost_entities: int = 0
    fact_sentences_cut: int = 0
    """Sentences (answers and gold) FactSumm's models read only in part (cut to their token limits)."""
    baseline_fallbacks: int = 0
    linkage: dict[str, float] | None = None
    """Graph variants: rows whose query had no edge above T, and rows topped up by cosine."""
    evaluate_mids: dict[str, float] = field(default_factory=dict)
    """Per key of :data:`EVALUATE_MIDS` shown, the value ``evaluate`` reports (NaN: no rows)."""
    same_prompts: tuple[int, int] | None = None
    """Compared variants: (rows whose prompt is the baseline's, rows compared); None: not known. Such rows
    get the same answer (a prompt is decoded once per model), so they differ by nothing."""


@dataclass
class ResultsTable:
    rows: list[TableRow]
    keys: list[str]
    """Score keys shown, in column order."""
    models: dict[str, str] = field(default_factory=dict)
    """Per stage (answers, retrieval, knowledge) and per metric, the model and settings behind the numbers,
    stand-ins named (from ``graphctx plan``)."""
    comparisons: int = 0
    """Paired tests in the table (variant pairs × metrics with a p-value): the family Holm corrects."""
    columns: dict[str, str] = field(default_factory=built_in_columns)
    """Score key (before any label) → column name, in column order (the config's metric registry)."""
    marks: dict[str, str] = field(default_factory=dict)
    """Score key → a mark in its column's header (``no signal``, ``constant``:
    :mod:`~graphctx.evaluation.matrix.judge_controls`)."""


def build_table(
    results: Sequence[VariantScores],
    n_resamples: int = 1000,
    seed: int = 0,
    models: Mapping[str, str] | None = None,
    comparisons: Mapping[str, str] = TEXT_TWINS,
    n_permutations: int = 10000,
    columns: Mapping[str, str] | None = None,
) -> ResultsTable:
    """Intervals of every metric and the paired tests fixed by ``comparisons`` (variant -> baseline).

    Each variant named in ``comparisons`` whose baseline was also run is compared with it on the rows both
    scored (mean difference, its bootstrap interval with ``n_resamples``, two-sided paired permutation
    p-value with ``n_permutations`` sign flips); the p-values of all the table's tests are then
    Holm-corrected together (:func:`~graphctx.metrics.stats.holm`). ``columns``: the metrics' columns
    (:func:`~graphctx.metrics.registry.column_order`; default: the built-in metrics').
    """
    columns = dict(columns) if columns is not None else built_in_columns()
    keys = shown_keys({key for result in results for key in result.scores}, columns)
    by_name = {result.variant.name: result for result in results}
    rows = []
    for result in results:
        baseline = comparisons.get(result.variant.name)
        rows.append(_table_row(result, keys, baseline if baseline in by_name else None, n_resamples, seed))
    tests: list[tuple[TableRow, str]] = []
    for result, row in zip(results, rows, strict=True):
        for key in keys:
            if row.baseline is None or math.isnan(row.intervals[key].mean):
                row.comparisons[key] = None
                continue
            ids = result.ids
            row.comparisons[key] = paired_test(
                result.aligned(key, ids),
                by_name[row.baseline].aligned(key, ids),
                n_resamples=n_resamples,
                seed=seed,
                n_permutations=n_permutations,
            )
            tests.append((row, key))
    for result, row in zip(results, rows, strict=True):
        if row.baseline is not None and result.prompts:
            other = by_name[row.baseline].prompts
            both = [i for i in result.ids if i in other]
            row.same_prompts = (sum(result.prompts[i] == other[i] for i in both), len(both))
    adjusted = holm([row.comparisons[key].p_value for row, key in tests])
    for (row, key), p_holm in zip(tests, adjusted, strict=True):
        row.comparisons[key] = dataclasses.replace(row.comparisons[key], p_holm=float(p_holm))
    family = int(sum(~np.isnan(adjusted)))
    return ResultsTable(rows, keys, dict(models or {}), family, columns)


def _table_row(
    result: VariantScores, keys: Sequence[str], baseline: str | None, n_resamples: int, seed: int
) -> TableRow:
    """``result``'s line: each key's mean with its bootstrap interval, its baseline, and its coverage
    counts (comparisons are filled in by :func:`build_table`)."""
    judged, over_limit = result.autoais_coverage()
    return TableRow(
        result.variant,
        {
            key: bootstrap_interval(result.scores.get(key, []), n_resamples=n_resamples, seed=seed)
            for key in keys
        },
        baseline=baseline,
        answered=len(result.ids),
        prompts_truncated=result.prompts_truncated,
        prompts_over_limit=result.prompts_over_limit,
        autoais_judged=judged,
        autoais_over_limit=over_limit,
        kg_lost_entities=result.kg_lost_entities,
        fact_sentences_cut=result.total("fact_sentences_cut"),
        baseline_fallbacks=result.baseline_fallbacks,
        linkage=result.linkage(),
        evaluate_mids=_evaluate_mids(result, keys, seed),
    )


def _evaluate_mids(result: VariantScores, keys: Sequence[str], seed: int) -> dict[str, float]:
    """``evaluate``'s value of each :data:`EVALUATE_MIDS` key over the rows where all are finite."""
    shown = [key for key in keys if key in EVALUATE_MIDS]
    if not shown:
        return {}
    columns = {key: np.asarray(result.scores[key], dtype=float) for key in shown}
    finite = np.logical_and.reduce([~np.isnan(values) for values in columns.values()])
    if not finite.any():
        return dict.fromkeys(shown, math.nan)
    return evaluate_mid({key: values[finite] for key, values in columns.items()}, seed)


def _number(value: float, digits: int = 4) -> str:
    return "" if math.isnan(value) else f"{value:.{digits}f}"


def to_csv(table: ResultsTable) -> str:
    """One line per variant: for each metric mean, low, high, n, and difference / p / Holm-corrected p vs
    the variant's baseline (``compared_with``)."""
    header = ["variant", "label", "model", "retrieval", "knowledge", "pairs", "compared_with", "answered"]
    header += ["prompts_truncated", "prompts_over_limit", "autoais_judged", "autoais_over_limit"]
    for key in table.keys:
        header += [key, f"{key}_low", f"{key}_high", f"{key}_n", f"{key}_vs_baseline", f"{key}_p"]
        header.append(f"{key}_p_holm")
        if key in EVALUATE_MIDS:
            header.append(f"{key}_evaluate_mid")
    header += ["kg_lost_entities", "fact_sentences_cut", "baseline_fallbacks"]
    header += ["graph_linked", "graph_no_edge", "graph_topped_up"]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for row in table.rows:
        v = row.variant
        line: list[str | int] = [
            v.name,
            v.label,
            v.model,
            v.retrieval,
            v.knowledge,
            v.pairs,
            row.baseline or "",
        ]
        line += [row.answered, row.prompts_truncated, row.prompts_over_limit]
        line += [row.autoais_judged, row.autoais_over_limit]
        for key in table.keys:
            interval, comparison = row.intervals[key], row.comparisons.get(key)
            line += [_number(interval.mean), _number(interval.low), _number(interval.high), interval.n]
            line += (
                [_number(comparison.mean_difference), _number(comparison.p_value), _number(comparison.p_holm)]
                if comparison
                else ["", "", ""]
            )
            if key in EVALUATE_MIDS:
                line.append(_number(row.evaluate_mids.get(key, math.nan)))
        line += [row.kg_lost_entities, row.fact_sentences_cut, row.baseline_fallbacks]
        linkage = row.linkage
        line += [linkage[k] for k in ("linked", "no_edge", "topped_up")] if linkage else ["", "", ""]
        writer.writerow(line)
    return buffer.getvalue()


def _too_few_rows_lines(table: ResultsTable, alpha: float = 0.05) -> list[str]:
    """A warning when no paired test of the table can reach ``alpha`` after Holm's correction, whatever the
    answers: with n rows the smallest p is 2 / 2^n (:func:`~graphctx.metrics.stats.smallest_p`)."""
    counts = [c.n for row in table.rows for c in row.comparisons.values() if c is not None and c.n > 0]
    if not counts or table.comparisons * smallest_p(max(counts)) <= alpha:
        return []
    most = max(counts)
    return [
        "",
        f"With at most {most} paired rows per test no difference can reach p < {alpha} after Holm: the "
        f"smallest p a sign-flip test of {most} rows gives is {smallest_p(most):.3g}, times "
        f"{table.comparisons} tests. Evaluate at least {rows_needed(table.comparisons, alpha)} questions "
        "(evaluation.limit) for these tests to be able to say anything.",
    ]


def to_markdown(table: ResultsTable, title: str = "Results") -> str:
    """Markdown: means with 95% intervals, differences from each variant's baseline with p and Holm's p,
    coverage (prompts cut, AutoAIS judged / rows with a context), graph linkage, and the model behind each
    metric."""
    names = [_header(table, key) for key in table.keys]
    main = [n for key, name in zip(table.keys, names, strict=True) for n in (name, EVALUATE_MIDS.get(key))]
    main = [name for name in main if name]
    intro = "Mean [95% bootstrap interval] over the scored rows (n)."
    if any(key in EVALUATE_MIDS for key in table.keys):
        intro += (
            " Beside ROUGE, the value `evaluate`'s rouge reports (the paper's number): the median of "
            "rouge_score's BootstrapAggregator (1,000 resamples, numpy seeded with evaluation.seed as "
            "`evaluate`'s seed does)."
        )
    lines = [f"## {title}", "", intro, ""]
    lines += ["| Variant | " + " | ".join(main) + " |", "|---" * (len(main) + 1) + "|"]
    for row in table.rows:
        cells = []
        for key in table.keys:
            interval = row.intervals[key]
            cells.append(
                "n/a"
                if interval.n == 0
                else f"{interval.mean:.4f} [{interval.low:.4f}, {interval.high:.4f}] (n={interval.n})"
            )
            if key in EVALUATE_MIDS:
                cells.append(_number(row.evaluate_mids.get(key, math.nan)) or "n/a")
        lines.append(f"| {row.variant.label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Difference from the baseline fixed for each variant (evaluation.comparisons; paired permutation "
        f"test p, and p Holm-corrected across the table's {table.comparisons} tests). Same prompt: the "
        "rows whose prompt is the baseline's, token for token (a graph query with no edge above T gets "
        "the dense hits; no fact may fit the budget); each prompt is decoded once, so those rows have the "
        "same answer and differ by nothing.",
        "",
    ]
    lines += ["| Variant | vs | same prompt | " + " | ".join(names) + " |", "|---" * (len(names) + 3) + "|"]
    for row in table.rows:
        if row.baseline is None:
            continue
        cells = []
        for key in table.keys:
            comparison = row.comparisons.get(key)
            if comparison is None or comparison.n == 0:
                cells.append("n/a")
            else:
                p, p_holm = comparison.p_value, comparison.p_holm
                cells.append(f"{comparison.mean_difference:+.4f} (p={p:.3g}, Holm {p_holm:.3g})")
        baseline = _label_of(table, row.baseline)
        same = f"{row.same_prompts[0]}/{row.same_prompts[1]}" if row.same_prompts else "n/a"
        lines.append(f"| {row.variant.label} | {baseline} | {same} | " + " | ".join(cells) + " |")
    lines += _too_few_rows_lines(table)
    lines += ["", *_coverage_lines(table), *_linkage_lines(table)]
    if table.models:
        lines += ["", "Models:", ""]
        lines += [f"- {name}: {description}" for name, description in table.models.items()]
    return "\n".join(lines) + "\n"


def _header(table: ResultsTable, key: str) -> str:
    """A column's header: its name, and its mark when it has one (``AutoAIS [x] (no signal)``)."""
    name = column_name(key, table.columns)
    return f"{name} ({table.marks[key]})" if key in table.marks else name


def _coverage_lines(table: ResultsTable) -> list[str]:
    """Per variant: answered rows, prompts cut to ``max_prompt_tokens``, AutoAIS coverage, KG losses."""
    lines = [
        "Coverage: prompts cut to max_prompt_tokens (knowledge sentences or lower-ranked pairs dropped), "
        "prompts over it (question + top pair kept whole), AutoAIS judged / rows with a context, "
        "KG entities whose lookups failed (kg_lost_entities; the next run asks again), sentences of answers "
        "and gold that FactSumm's NER or relation model read only up to its token limit, baseline rows "
        "where the baseline gave up and answered with the top retrieved answer (TechSumBot on code-only "
        "answers).",
        "",
        "| Variant | answered | prompts cut | prompts over limit | AutoAIS judged | AutoAIS over limit "
        "| KG entities lost | FactSumm sentences cut | baseline fallbacks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.rows:
        with_context = row.autoais_judged + row.autoais_over_limit
        judged = f"{row.autoais_judged}/{with_context}" if with_context else "n/a"
        lines.append(
            f"| {row.variant.label} | {row.answered} | {row.prompts_truncated} | {row.prompts_over_limit} "
            f"| {judged} | {row.autoais_over_limit} | {row.kg_lost_entities} | {row.fact_sentences_cut} "
            f"| {row.baseline_fallbacks} |"
        )
    return lines


def _linkage_lines(table: ResultsTable) -> list[str]:
    """Per graph variant, how its rows' queries linked to the question graph (GraphGen rows topped up by
    cosine are partly TextGen)."""
    graph_rows = [row for row in table.rows if row.linkage is not None]
    if not graph_rows:
        return []
    lines = ["", "Graph linkage of the scored rows (queries without an edge get cosine hits only):", ""]
    return lines + [f"- {row.variant.label}: {describe_linkage(row.linkage)}" for row in graph_rows]


def _label_of(table: ResultsTable, name: str | None) -> str:
    labels = {row.variant.name: row.variant.label for row in table.rows}
    return labels.get(name, "n/a") if name else "n/a"


def write_table(
    table: ResultsTable, output_dir: Path, stem: str = "results", appendix: str = ""
) -> Mapping[str, Path]:
    """``<stem>.md`` (with ``appendix``, a Markdown section, after the table) and ``<stem>.csv`` in
    ``output_dir``, each written atomically."""
    paths = {"markdown": output_dir / f"{stem}.md", "csv": output_dir / f"{stem}.csv"}
    markdown = to_markdown(table) + (f"\n{appendix}" if appendix else "")
    for path, text in ((paths["markdown"], markdown), (paths["csv"], to_csv(table))):
        with atomic_path(path) as tmp:
            tmp.write_text(text)
    return paths
