"""Reproduce the paper: every stage of its protocol per site, here or as SLURM jobs, skipping what is done.

Stages per site (one --config per site): data → index → train → genqa (when GenQA is evaluated) → evaluate
→ sweep (with --sweep-models) and human (the annotation export); then tables (every site's "Beside the
paper" table in one file). Each stage is the command a user would type (graphctx data/index/genqa/annotate,
train.py, evaluate.py). A stage whose outputs were recorded for the same inputs and still hash the same is
skipped ("skip <stage>: up to date (<fingerprint>)"); a changed setting, dump or upstream output reruns it
and what follows. Run it from the repository root (the configs' relative paths are read from there).

  graphctx reproduce --config configs/llama2-7b-askubuntu.yaml --config configs/llama2-7b-unix.yaml --dry-run
  graphctx reproduce --config configs/llama2-7b-askubuntu.yaml --slurm

Locally the stages run in order. With --slurm each is submitted (sbatch --parsable) with its resources and
--dependency=afterok on what it needs; train and evaluate go through scripts/slurm/{train,evaluate}.sbatch,
so a preempted job resumes from its checkpoint; after a failed job, run the same command again: it
resubmits from the first stage not done. A second reproduce on the same --state folder while one runs (or
its jobs are queued) is refused. --dry-run prints the graph, resources, commands and the cost (GPU-hours and
peak memory per rank, as graphctx plan --cost computes them) and writes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from graphctx.commands import wrote

if TYPE_CHECKING:
    from graphctx.reproduce.sites import Site
    from graphctx.reproduce.stages import Stage


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from graphctx.reproduce.stages import KINDS

    parser.epilog = (
        "Each --config is a site's config file, read as it is by the stages: this command takes no "
        "--section.key settings (set them in the files)."
    )
    parser.add_argument(
        "--config", action="append", required=True, help="YAML config of one site; repeat it for each site"
    )
    parser.add_argument("--sites", nargs="+", help="run only these sites (default: every --config's site)")
    parser.add_argument(
        "--stages",
        nargs="+",
        choices=KINDS,
        help="run only these stages (and what they need), e.g. --stages train: data, train",
    )
    parser.add_argument("--slurm", action="store_true", help="submit each stage as a SLURM job (sbatch)")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the stage graph and its cost; submit and write nothing"
    )
    parser.add_argument(
        "--state",
        default="runs/reproduce",
        help="folder of the stage records, logs, the annotation export and the tables "
        "(default runs/reproduce)",
    )
    parser.add_argument(
        "--sweep-models", nargs="+", default=[], help="base models of the sweep stage (evaluate.py --models)"
    )
    parser.add_argument(
        "--annotators",
        nargs="+",
        default=["annotator1", "annotator2", "annotator3"],
        help="annotator names of the human-evaluation export (paper: 3 per site)",
    )
    parser.add_argument(
        "--human-variants",
        nargs="+",
        default=["GraphContextGen", "TextContextGen"],
        help="variants rated in the human-evaluation export (default GraphContextGen TextContextGen; those "
        "not evaluated are left out)",
    )
    parser.add_argument(
        "--human-questions",
        type=int,
        default=50,
        help="questions per site in the human-evaluation export (paper: 50; at most evaluation.limit)",
    )
    parser.add_argument(
        "--counts",
        help="--dry-run: rows per split for every site, e.g. train=40000,test=2000 (default: read)",
    )
    parser.add_argument(
        "--throughput",
        type=Path,
        help="--dry-run: a benchmarks/gpu_suite.py report (as graphctx plan --cost)",
    )


def execute(args: argparse.Namespace, out: TextIO) -> int:
    from graphctx.errors import ConfigError
    from graphctx.evaluation.matrix.export import git_commit
    from graphctx.folder_lock import holding
    from graphctx.reproduce.sites import load_sites
    from graphctx.reproduce.stages import Options, build_stages, only
    from graphctx.reproduce.state import State

    missing = [name for name in ("train.py", "evaluate.py", "scripts/slurm") if not Path(name).exists()]
    if missing:
        raise ConfigError(
            f"{Path.cwd()}: no {', '.join(missing)} here; run graphctx reproduce from the repository root "
            "(the stages run train.py, evaluate.py and scripts/slurm/*.sbatch from there)"
        )
    if args.human_questions < 1:
        raise ConfigError(f"--human-questions {args.human_questions}: must be at least 1")
    if args.slurm and not args.dry_run:
        from graphctx.reproduce.slurm import check_sbatch

        check_sbatch()
    state = State(Path(args.state))
    if state.folder.exists() and not state.folder.is_dir():
        raise ConfigError(f"--state {state.folder}: not a folder; name a folder (made if missing)")
    sites = load_sites(args.config, args.sites)
    options = Options(
        state=state.folder,
        sweep_models=tuple(args.sweep_models),
        annotators=tuple(args.annotators),
        human_variants=tuple(args.human_variants),
        human_questions=args.human_questions,
        digest_sources=not args.dry_run,
    )
    if args.dry_run and not args.counts:  # the cost reads each site's rows: name --counts if it cannot
        from graphctx.stack.counts import check_countable
        from graphctx.stack.model_stack import ModelStack

        for site in sites:
            check_countable(ModelStack(site.config))
    stages = build_stages(sites, options)  # a missing dump is named here, before anything is written
    if args.stages:
        stages = only(stages, args.stages)
    if args.dry_run:
        print(dry_run(stages, sites, args), file=out)
        wrote(out, [], verb="wrote (--dry-run)")
        return 0
    commit = git_commit(Path(__file__).resolve().parents[2])
    state.check_commit(commit)
    with holding(state.folder, "another graphctx reproduce"):
        done = state.done_stages(stages)
        if args.slurm:
            from graphctx.reproduce.slurm import queued_jobs, submit

            queued = queued_jobs(state)
            if queued:
                raise ConfigError(
                    f"{state.folder}: jobs of an earlier graphctx reproduce are still queued or running "
                    f"({' '.join(queued)}); wait for them or scancel them"
                )
            state.begin(commit)
            submit(stages, state, done, out)
        else:
            from graphctx.reproduce.local import run_local

            state.begin(commit)
            run_local(stages, state, done, out)
    results = [output for stage in stages if stage.kind in ("evaluate", "tables") for output in stage.outputs]
    results = results or [
        output for stage in stages[-1:] for output in stage.outputs
    ]  # --stages without them
    wrote(out, results, verb="results (once the jobs finish)" if args.slurm else "wrote")
    return 0


def stage_costs(site: Site, args: argparse.Namespace, sweep_models: list[str]) -> dict[str, Any]:
    """``graphctx plan --cost``'s estimate of the site's config (train and answers), and of each sweep
    model's answers (its base variants)."""
    from graphctx.prompts import VARIANTS
    from graphctx.stack.cost import LAST_MEASURED, cost_json, parse_counts, read_throughputs
    from graphctx.stack.counts import split_sizes
    from graphctx.stack.model_stack import ModelStack

    config = site.config
    counts = parse_counts(args.counts) if args.counts else split_sizes(ModelStack(config))
    rates = read_throughputs(args.throughput) if args.throughput else LAST_MEASURED
    cost = cost_json(ModelStack(config), counts, rates)
    sweep = []
    base = [name for name, variant in VARIANTS.items() if variant.model == "base"]
    for model in sweep_models:
        spec = dataclasses.replace(config.model.spec, source=model)
        swept = dataclasses.replace(
            config,
            model=dataclasses.replace(config.model, spec=spec),
            evaluation=dataclasses.replace(config.evaluation, variants=base),
        )
        sweep.append(cost_json(ModelStack(swept), counts, rates)["stages"]["answers"])
    return {
        "train": cost["stages"]["train"],
        "evaluate": cost["stages"]["answers"],
        "sweep": sweep,
        "all": cost,
    }


def _hours(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.4g} GPU-h"


def dry_run(stages: list[Stage], sites: list[Site], args: argparse.Namespace) -> str:
    """The stage graph with each stage's resources, command and cost, then the totals."""
    costs = {site.name: stage_costs(site, args, args.sweep_models) for site in sites}
    lines = [f"graphctx reproduce: {len(stages)} stages, sites {' '.join(s.name for s in sites)}", ""]
    total: float | None = 0.0
    peak = 0.0
    for stage in stages:
        site_cost = costs.get(stage.site or "", {})
        if stage.kind in ("train", "evaluate"):
            found = site_cost[stage.kind]
            hours, gib = found["gpu_hours"], found["peak_gib"]
            cost = f"{_hours(hours)}, {gib} GiB per rank"
        elif stage.kind == "sweep":
            hours_each = [s["gpu_hours"] for s in site_cost["sweep"]]
            hours = None if None in hours_each else sum(hours_each)
            gib = max(s["peak_gib"] for s in site_cost["sweep"])
            cost = f"{_hours(hours)}, {gib} GiB per rank ({len(hours_each)} models × base variants)"
        else:
            hours, gib = 0.0, 0.0
            cost = "not estimated (CPU work, or not in graphctx plan --cost)"
        total = None if total is None or hours is None else total + hours
        peak = max(peak, gib)
        lines += [
            f"{stage.name}",
            f"    needs      {', '.join(stage.needs) or '-'}",
            f"    resources  {stage.resources.describe()}  [{stage.script}]",
            f"    command    {' '.join(stage.command)}",
            f"    outputs    {', '.join(stage.outputs)}",
            f"    cost       {cost}",
        ]
    source = next(iter(costs.values()))["all"]["throughputs"]["source"] if costs else ""
    lines += [
        "",
        f"total: {_hours(total)} (train + answers of every site and sweep model; upper bounds), "
        f"peak {peak} GiB per rank",
        f"throughputs from {source}; not counted: prefill, retrieval and the knowledge stage, scoring, "
        "model loading, the CPU stages",
    ]
    return "\n".join(lines)
