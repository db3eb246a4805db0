"""Print the resolved stack of a config (models, layers, devices, stand-ins) without loading any weights."""

from __future__ import annotations

import argparse
import json
from typing import TextIO


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="YAML config (as for train.py / evaluate.py)")
    parser.add_argument("--json", action="store_true", help="print the plan as one JSON object")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from graphctx.pipeline.config_file import load_config
    from graphctx.pipeline.plan import Plan

    plan = Plan(load_config(args.config, devices=False))
    print(json.dumps(plan.to_json(), indent=2) if args.json else plan.to_text(), file=out)
    return 0
