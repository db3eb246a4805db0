"""The ``graphctx`` console script: one subcommand per module in :mod:`graphctx.commands`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from graphctx.errors import GraphctxError
from graphctx.settings_help import add_settings_help

COMMANDS: tuple[str, ...] = ("data", "index", "retrieve", "enhance", "answer", "plan")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered subcommand."""
    parser = argparse.ArgumentParser(prog="graphctx", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"graphctx.commands.{name}")
        sub = subparsers.add_parser(name, help=module.__doc__.strip().splitlines()[0], add_help=False)
        module.add_arguments(sub)
        if "--config" in sub._option_string_actions:  # its --help lists the config's settings too
            add_settings_help(sub)
        else:
            sub.add_argument("-h", "--help", action="help", help="show this help message and exit")
        sub.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; its return value is the exit status."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except GraphctxError as error:  # bad input or settings: one line naming the file, row or key
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
