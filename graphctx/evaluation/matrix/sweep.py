"""A model sweep: several base models, each scored zero-shot and with context, in one table (Table 2's
layout, the paper comparing Llama-2, Vicuna, Falcon, GPT-NeoX, ... zero-shot).

``evaluate.py --models A B ...`` runs one :class:`~graphctx.evaluation.matrix.runner.MatrixEvaluation` per
model, each into ``<output_dir>/models/<model name>/`` (resumable like any run: a rerun answers only what is
missing), then writes ``<output_dir>/sweep.md`` and ``sweep.csv``: one row per (model, variant), the
model in the ``Model`` / ``generation_model`` column. Only the base model's variants take part
(``ZeroShot``, ``Base-*``; the adapter was trained on one base model). Every model is looked up before
anything runs: one that cannot be found stops the sweep with one error line naming it, and nothing is
written.
"""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

from graphctx.cache import atomic_path
from graphctx.errors import ConfigError, check_output_folder
from graphctx.evaluation.matrix.inputs import check_inputs
from graphctx.evaluation.matrix.runner import MatrixEvaluation
from graphctx.evaluation.matrix.table import ResultsTable, column_name, shown_keys, to_csv
from graphctx.paper import display_name
from graphctx.paths import inside
from graphctx.pipeline.processes import Processes, StopRequest
from graphctx.pipeline.run_config import RunConfig
from graphctx.prompts import VARIANTS, Variant, get_variants
from graphctx.stack.model_stack import ModelStack


def sweep_variants(names: Sequence[str] | None) -> list[Variant]:
    """The variants of a sweep: ``names`` (default: every base-model variant); others are refused."""
    variants = get_variants(names) if names else [v for v in VARIANTS.values() if v.model == "base"]
    other = [v.name for v in variants if v.model != "base"]
    if other:
        raise ConfigError(
            f"--models: a sweep runs base-model variants only (ZeroShot, Base-*); {other} need the adapter "
            "or a baseline, which belong to one model's run"
        )
    return variants


def model_folders(models: Sequence[str]) -> dict[str, str]:
    """Each model's folder name under ``models/`` (its last path or id part); two alike, and a name that is
    no folder inside ``models/`` (``..``), are refused."""
    names = {model: inside("models", display_name(model), where=f"--models {model}").name for model in models}
    taken: dict[str, str] = {}
    for model, name in names.items():
        if name in taken:
            raise ConfigError(f"--models: {taken[name]!r} and {model!r} would share the folder models/{name}")
        taken[name] = model
    return names


def check_sweep(
    configs: Mapping[str, RunConfig], variants: Sequence[Variant], metrics: Sequence[str] | None = None
) -> None:
    """One ``ConfigError`` naming every model (or other model a run needs: ``metrics``, default all) that
    cannot be found."""
    problems = []
    for model, config in configs.items():
        plan = ModelStack(config)
        problems += [
            f"sweep model {model}: {item['hint']}"
            for item in plan.missing(plan.needed_by("evaluate", variants, metrics))
        ]
    if problems:
        raise ConfigError("; ".join(problems))


SAME_QUESTIONS = (
    "Every model answers the same questions from the same pool: the data is filtered and split once, a "
    "question kept only when it fits data.dataset.filters.max_tokens in every swept model's tokenizer."
)


def one_question_set(configs: Mapping[str, RunConfig]) -> dict[str, RunConfig]:
    """``configs`` with the token limit counted in every swept model's tokenizer (:data:`SAME_QUESTIONS`),
    checked: a model whose evaluated split or pool has other question ids is refused in one line."""
    specs = tuple(config.model.spec for config in configs.values())
    shared = {model: dataclasses.replace(config, filter_models=specs) for model, config in configs.items()}
    if next(iter(shared.values())).data.dataset.filters.max_tokens is None:
        return shared
    reference, sets = None, {}
    for model, config in shared.items():
        dataset = config.load_dataset()
        split = config.evaluation.split
        sets[model] = (tuple(dataset[split]["id"]), tuple(dataset["train"]["id"]))
        reference = reference or model
        if sets[model] != sets[reference]:
            raise ConfigError(
                f"--models: {model} would answer other questions than {reference} (its {split} split or "
                "pool differs): a sweep compares models on one question set; check the data settings"
            )
    return shared


def run_sweep(
    configs: Mapping[str, RunConfig],
    variants: Sequence[str] | None,
    limit: int | None,
    output_dir: str | Path | None,
    processes: Processes | None = None,
    stop: StopRequest | None = None,
    overwrite: bool = False,
    output_key: str = "evaluation.output_dir",
    metrics: Sequence[str] | None = None,
) -> str | None:
    """Run every model of ``configs`` (model → its config) and write ``sweep.md`` / ``sweep.csv``; returns
    the Markdown table (None on ranks other than 0). Every model's run passes the checks of a single run
    (:func:`~.inputs.check_inputs`, ``output_key`` naming the folder's setting) before
    any of them writes a file. ``metrics``: score only these (``--metrics``)."""
    chosen = sweep_variants(variants)
    folders = model_folders(list(configs))
    first = next(iter(configs.values()))
    root = Path(output_dir) if output_dir else first.output_dir
    check_output_folder(root, output_key)  # before the models are looked for, as in a single run
    check_sweep(configs, chosen, metrics)
    configs = one_question_set(configs)
    runs = {
        model: MatrixEvaluation(
            config,
            [v.name for v in chosen],
            limit,
            root / "models" / folders[model],
            processes=processes,
            stop=stop,
            metrics=metrics,
        )
        for model, config in configs.items()
    }
    for run in runs.values():
        check_inputs(run, output_key, overwrite)
    tables: dict[str, ResultsTable] = {}
    for model, run in runs.items():
        table = run.evaluate(overwrite=overwrite)
        if table is not None:
            tables[model] = table
    if not tables:
        return None
    markdown, text = sweep_markdown(tables), sweep_csv(tables)
    for path, content in ((root / "sweep.md", markdown), (root / "sweep.csv", text)):
        with atomic_path(path) as tmp:
            tmp.write_text(content)
    return markdown


def _columns(tables: Mapping[str, ResultsTable]) -> dict[str, str]:
    """Every table's columns (each model of a sweep runs the same metrics)."""
    return {base: name for table in tables.values() for base, name in table.columns.items()}


def _keys(tables: Mapping[str, ResultsTable]) -> list[str]:
    return shown_keys({key for table in tables.values() for key in table.keys}, _columns(tables))


def sweep_markdown(tables: Mapping[str, ResultsTable]) -> str:
    """One row per (model, variant): each metric's mean with its 95% bootstrap interval."""
    keys = _keys(tables)
    lines = ["## Model sweep", "", SAME_QUESTIONS, ""]
    lines += ["Mean [95% bootstrap interval] over the scored rows (n), per model.", ""]
    columns = _columns(tables)
    lines += ["| Model | Variant | " + " | ".join(column_name(k, columns) for k in keys) + " |"]
    lines.append("|---" * (len(keys) + 2) + "|")
    for model, table in tables.items():
        for row in table.rows:
            cells = []
            for key in keys:
                interval = row.intervals.get(key)
                cells.append(
                    "n/a"
                    if interval is None or interval.n == 0
                    else f"{interval.mean:.4f} [{interval.low:.4f}, {interval.high:.4f}] (n={interval.n})"
                )
            lines.append(f"| {model} | {row.variant.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def sweep_csv(tables: Mapping[str, ResultsTable]) -> str:
    """Each model's ``results.csv`` lines after a ``generation_model`` column (``model`` is the variant's
    kind there); the columns are the union of the models'."""
    parts = [(model, list(csv.DictReader(io.StringIO(to_csv(table))))) for model, table in tables.items()]
    header = ["generation_model", *dict.fromkeys(k for _, rows in parts for row in rows for k in row)]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, header, lineterminator="\n")
    writer.writeheader()
    for model, rows in parts:
        writer.writerows({"generation_model": model, **row} for row in rows)
    return buffer.getvalue()
