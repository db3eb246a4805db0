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
import contextlib
import sys
from typing import TextIO

from graphctx.errors import debug_enabled, report
from graphctx.prompts import VARIANTS
from graphctx.quiet import quiet_third_party


def positive_int(value: str) -> int:
    """``--limit``: a whole number of at least 1."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", required=True, help="YAML config (as for train.py)")
    parser.add_argument(
        "--variants", nargs="+", choices=list(VARIANTS), help="variants to run (default: evaluation.variants)"
    )
    parser.add_argument(
        "--limit", type=positive_int, help="evaluate the first N questions of the split (by id)"
    )
    parser.add_argument("--output-dir", help="default: evaluation.output_dir")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="discard answers made with other settings (else: fail)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Evaluate; the results table goes to stdout, all else to stderr. graphctx's own errors end it with one
    ``error: ...`` line (``--debug`` or ``GRAPHCTX_DEBUG=1``: and the traceback)."""
    args = build_parser().parse_args(argv)
    results = sys.stdout
    quiet_third_party()
    with contextlib.redirect_stdout(sys.stderr):
        return report(lambda: evaluate(args, results), debug_enabled(args.debug))


def evaluate(args: argparse.Namespace, out: TextIO) -> int:
    from graphctx.config import load_config
    from graphctx.evaluation.runner import EvaluationRun
    from graphctx.evaluation.table import to_markdown

    config = load_config(args.config)
    table = EvaluationRun(config, args.variants, args.limit, args.output_dir).run(overwrite=args.overwrite)
    print(to_markdown(table), file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
