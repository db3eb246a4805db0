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
    from graphctx.stack.model_stack import ModelStack
    from graphctx.stack.report_json import plan_json
    from graphctx.stack.report_text import plan_text

    plan = ModelStack(load_config(args.config, devices=False))
    print(json.dumps(plan_json(plan), indent=2) if args.json else plan_text(plan), file=out)
    return 0
