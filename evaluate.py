"""Evaluate the paper's variant matrix on the test split.

    python evaluate.py --config configs/tiny.yaml [--variants ...] [--limit N]

For each variant (see ``graphctx.prompts.VARIANTS``) the test split's questions are answered with the
variant's prompt and model, the answers scored (BERTScore, ROUGE-1/L, fact score, AutoAIS, entity Jaccard),
and a results table written with 95% bootstrap intervals and paired tests against the best baseline.
Predictions are appended to JSONL files as they are made: rerunning the same command after an interruption
continues where it stopped.
"""

from __future__ import annotations

import argparse
import sys

from graphctx.config import load_config
from graphctx.errors import GraphctxError
from graphctx.evaluation.runner import EvaluationRun
from graphctx.evaluation.table import to_markdown
from graphctx.prompts import VARIANTS
from graphctx.settings_help import add_settings_help


def positive_int(value: str) -> int:
    """``--limit``: a whole number of at least 1."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False
    )
    parser.add_argument("--config", required=True, help="YAML config (as for train.py)")
    add_settings_help(parser)
    parser.add_argument(
        "--variants", nargs="+", choices=list(VARIANTS), help="variants to run (default: evaluation.variants)"
    )
    parser.add_argument(
        "--limit", type=positive_int, help="evaluate the first N questions of the split (by id)"
    )
    parser.add_argument("--output-dir", help="default: evaluation.output_dir")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="discard answers made with other settings (else: fail)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
        table = EvaluationRun(config, args.variants, args.limit, args.output_dir).run(
            overwrite=args.overwrite
        )
    except GraphctxError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(to_markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
