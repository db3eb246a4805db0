"""Print the resolved stack of a config (models, layers, devices, stand-ins) without loading any weights."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from graphctx.command_line import add_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "YAML config (as for train.py / evaluate.py)")
    parser.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    parser.add_argument(
        "--cost",
        action="store_true",
        help="add GPU-hours per stage (train, answers) and peak memory, estimated before running",
    )
    parser.add_argument(
        "--counts", help="--cost: rows per split, e.g. train=351,test=45 (default: the config's dataset)"
    )
    parser.add_argument(
        "--throughput",
        type=Path,
        help="--cost: a benchmarks/gpu_suite.py report (gpu_suite.json); default: the README's last figures",
    )


def execute(args: argparse.Namespace, out: TextIO) -> int:
    from graphctx.pipeline.config_file import run_config
    from graphctx.stack.model_stack import ModelStack
    from graphctx.stack.report import plan_json, plan_text

    plan = ModelStack(run_config(args, devices=False))
    report = plan_json(plan)
    text = plan_text(plan, report)
    if args.cost:
        from graphctx.stack.cost import LAST_MEASURED, cost_json, cost_text, parse_counts, read_throughputs
        from graphctx.stack.counts import split_sizes

        counts = parse_counts(args.counts) if args.counts else split_sizes(plan)
        throughputs = read_throughputs(args.throughput) if args.throughput else LAST_MEASURED
        report["cost"] = cost_json(plan, counts, throughputs)
        text += "\n" + cost_text(report["cost"])
    print(json.dumps(report, indent=2) if args.json else text, file=out)
    return 0
