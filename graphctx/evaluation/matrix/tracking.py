"""Weights & Biases logging of an evaluation: summary scalars, the results table, every prediction."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from graphctx.evaluation.jsonl import RecordFile
from graphctx.evaluation.matrix.table import ResultsTable, column_name
from graphctx.evaluation_settings import EvaluationSettings

PREDICTION_COLUMNS = ("id", "question", "context", "generated", "gold")


def results_rows(table: ResultsTable) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of the results table for a W&B table (mean, low, high, Δ vs the variant's baseline,
    p, Holm's p per metric)."""
    columns = ["variant"]
    for key in table.keys:
        name = column_name(key, table.columns)
        columns += [name, f"{name} low", f"{name} high", f"{name} Δ baseline", f"{name} p", f"{name} p Holm"]
    rows = []
    for row in table.rows:
        line: list[Any] = [row.variant.label]
        for key in table.keys:
            interval, comparison = row.intervals[key], row.comparisons.get(key)
            line += [interval.mean, interval.low, interval.high]
            line += (
                [comparison.mean_difference, comparison.p_value, comparison.p_holm]
                if comparison
                else [None, None, None]
            )
        rows.append(line)
    return columns, rows


def prediction_rows(
    predictions: dict[int, dict[str, Any]], scores: dict[int, dict[str, Any]]
) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of one variant's predictions with their per-row scores."""
    keys = sorted({key for record in scores.values() for key in record if key != "id"})
    columns = [*PREDICTION_COLUMNS, *keys]
    rows = [
        [predictions[i][c] for c in PREDICTION_COLUMNS] + [scores.get(i, {}).get(k) for k in keys]
        for i in sorted(predictions)
    ]
    return columns, rows


def log_results(
    settings: EvaluationSettings,
    config_path: Path,
    table: ResultsTable,
    files: dict[str, tuple[Path, Path]],
    output_dir: Path,
    plan: dict[str, Any] | None = None,
) -> None:
    """One W&B run (offline by default, under ``output_dir/wandb``) with everything of the evaluation.

    ``files`` maps each variant name to its predictions and scores JSONL files; ``plan`` (the resolved
    stack, ``graphctx plan --json``) goes into the run's config.
    """
    if settings.wandb_project is None:
        return
    import wandb

    output_dir.mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=settings.wandb_project,
        mode=settings.wandb_mode,
        dir=str(output_dir),
        name=f"evaluate-{Path(config_path).stem}",
        job_type="evaluation",
        config={
            "config_file": str(config_path),
            "evaluation": dataclasses.asdict(settings),
            "plan": plan or {},
        },
    )
    try:
        for row in table.rows:
            for key in table.keys:
                run.summary[f"eval/{row.variant.name}/{key}"] = row.intervals[key].mean
        columns, rows = results_rows(table)
        tables: dict[str, Any] = {"eval/results": wandb.Table(columns=columns, data=rows)}
        for name, (predictions, scores) in files.items():
            columns, rows = prediction_rows(RecordFile(predictions).records, RecordFile(scores).records)
            tables[f"eval/predictions/{name}"] = wandb.Table(columns=columns, data=rows)
        run.log(tables)
    finally:
        run.finish()
