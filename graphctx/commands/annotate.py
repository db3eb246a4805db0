"""Human evaluation: export a blinded annotation set (Doccano, Label Studio), import its ratings (Figure 3).

``graphctx annotate export`` draws N questions answered by every chosen variant of evaluate.py's
predictions and writes, per annotator, the question × (each variant's answer + the gold answer) items in
their own order, in Doccano JSONL and Label Studio JSON, plus the private key. ``graphctx annotate import``
reads the tools' exports back with the keys (one export per site) and writes the rating distribution, the
win rate against gold and ordinal Krippendorff's alpha per site (markdown, CSV, one JSON line, a plot).

``--task ais`` exports each variant's answers with their attributions (Attributed QA's human AIS: the rater
sees the question, the answer and the attributed passage with its link); its import writes AIS per variant
and architecture, nominal alpha and the AutoAIS–AIS correlations (the key says which task it is).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from jsonargparse import ArgumentParser, Namespace

from graphctx.command_line import NO_CONFIG, HelpFormatter, add_config
from graphctx.errors import ConfigError, check_output_folder
from graphctx.evaluation.annotation.formats import AIS, HELPFULNESS, TASKS


def add_arguments(parser: ArgumentParser) -> None:
    actions = parser.add_subcommands(dest="action", required=True)
    export = ArgumentParser(prog=f"{parser.prog} export", formatter_class=HelpFormatter)
    export.add_argument("--predictions-dir", help="folder of <variant>.jsonl (default: the config's)")
    export.add_argument("--site", help="site name (default: the config's data.dataset.site or dump name)")
    export.add_argument("--variants", nargs="+", required=True, help="variants whose answers are rated")
    export.add_argument(
        "--task",
        choices=TASKS,
        default=HELPFULNESS,
        help="helpfulness: 1-5 against gold (the paper's Figure 3); ais: each answer's attribution (AIS)",
    )
    export.add_argument("--questions", type=int, default=50, help="questions to draw (paper: 50)")
    export.add_argument("--annotators", nargs="+", required=True, help="annotator names (paper: 3 per site)")
    export.add_argument("--seed", type=int, default=0, help="seed of the draw and of the orders")
    export.add_argument("--out", required=True, help="export folder to write (must not exist)")
    export.add_argument("--overwrite", action="store_true", help="replace an existing export folder")
    add_config(export, "YAML config: its evaluation output folder and site are used", required=False)
    export.set_defaults({"data.dataset.source": ""})  # read only when --config names a file
    actions.add_subcommand("export", export, help="write a blinded annotation set and its key")
    imported = ArgumentParser(prog=f"{parser.prog} import", formatter_class=HelpFormatter, epilog=NO_CONFIG)
    imported.add_argument(
        "--key", nargs="+", required=True, help="export folders (or key.json), one per site"
    )
    imported.add_argument(
        "--ratings",
        nargs="+",
        required=True,
        help="exports of the tools: Doccano .zip/.jsonl, Label Studio .json",
    )
    imported.add_argument(
        "--out",
        required=True,
        help="folder for human_eval.{md,csv,json} and figure3.png (AIS: human_ais.* and autoais_vs_ais.png)",
    )
    imported.add_argument(
        "--bootstrap-samples", type=int, default=2000, help="resamples of the win-rate (AIS) intervals"
    )
    imported.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    actions.add_subcommand("import", imported, help="read the ratings back and compute Figure 3")


def config_sources(args: Namespace) -> tuple[Path, str]:
    """The predictions folder and the site of a config: ``<RunConfig.output_dir>/predictions`` (where
    evaluate.py writes them), and ``data.dataset.site`` or the name of its dump. (The one place this command
    reads a config.)"""
    from graphctx.data.dumpfiles import site_name
    from graphctx.pipeline.config_file import run_config

    config = run_config(args, devices=False)
    dataset = config.data.dataset
    site = dataset.site or site_name(Path(dataset.source.removeprefix("hf:")))
    return config.output_dir / "predictions", site


def run_export(args: Namespace) -> dict[str, Any]:
    from graphctx.evaluation.annotation.export import ExportSpec, make_items, read_predictions, write_export

    if args.config is None and (args.predictions_dir is None or args.site is None):
        raise ConfigError("annotate export: give --config, or both --predictions-dir and --site")
    predictions, site = config_sources(args) if args.config else (None, None)
    predictions = Path(args.predictions_dir) if args.predictions_dir else predictions
    spec = ExportSpec(
        args.site or site, tuple(args.variants), args.questions, tuple(args.annotators), args.seed, args.task
    )
    items, export = make_items(read_predictions(predictions, spec.variants, spec.task), spec)
    files = write_export(Path(args.out), items, spec, export, args.overwrite)
    return {"export": export, "site": spec.site, "items": len(items), "files": [str(f) for f in files]}


def run_import(args: Namespace) -> dict[str, Any]:
    from graphctx.evaluation.annotation import ais_ratings, ais_report, ratings, report
    from graphctx.evaluation.annotation.ingest import collect_ratings, read_keys

    keys = read_keys([Path(path) for path in args.key])
    collected = collect_ratings([Path(path) for path in args.ratings], keys)
    ais = next(iter(keys.values())).task == AIS  # one task per import (read_keys)
    figures, written = (ais_ratings, ais_report) if ais else (ratings, report)
    sites = figures.every_site(collected, args.bootstrap_samples, args.seed)
    files = written.write_report(sites, Path(args.out))
    return {"sites": written.summary(sites), "files": {kind: str(path) for kind, path in files.items()}}


def execute(args: Namespace, out: TextIO) -> int:
    chosen = args[args.action]
    check_output_folder(Path(chosen.out), "--out")  # before anything is read
    result = run_export(chosen) if args.action == "export" else run_import(chosen)
    print(json.dumps(result), file=out)
    return 0
