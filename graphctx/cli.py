"""The ``graphctx`` console script: one subcommand per module in :mod:`graphctx.commands`.

Results go to stdout and nothing else does: what libraries print while the command runs (``--json``
included) goes to stderr. graphctx's own errors end the command with one ``error: ...`` line and exit
status 1; ``--debug`` (or ``GRAPHCTX_DEBUG=1``) shows the traceback as well.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
from collections.abc import Sequence

from graphctx.errors import debug_enabled, report
from graphctx.quiet import quiet_third_party
from graphctx.settings_help import add_settings_help, every_setting

COMMANDS: tuple[str, ...] = (
    "data",
    "index",
    "retrieve",
    "retrieval-eval",
    "enhance",
    "answer",
    "plan",
    "genqa",
    "annotate",
    "export",
    "reproduce",
    "serve",
)
"""Subcommand names; each is the module of :mod:`graphctx.commands` of that name, ``-`` read as ``_``."""


def summary(docstring: str) -> str:
    """A subcommand's one-line help: the first sentence of its module docstring, whole (lines joined)."""
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    return re.match(r"(.+?[.])(?:\s|$)", paragraph + " ").group(1)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered subcommand (their modules import nothing heavy)."""
    parser = argparse.ArgumentParser(
        prog="graphctx", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"graphctx.commands.{name.replace('-', '_')}")
        sub = subparsers.add_parser(name, help=summary(module.__doc__), add_help=False)
        module.add_arguments(sub)
        if "--config" in sub._option_string_actions:  # its --help lists the config's settings too
            add_settings_help(sub, getattr(module, "settings_help", every_setting))
        else:
            sub.add_argument("-h", "--help", action="help", help="show this help message and exit")
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        sub.set_defaults(execute=module.execute)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; its return value is the exit status. A subcommand that
    sets ``takes_overrides`` gets the arguments it does not know as ``args.overrides`` (dotted
    ``--section.key value`` settings, as train.py and evaluate.py take them); any other refuses them. A
    reader that closes the pipe early (``graphctx data --help | head``) ends the command quietly."""
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if extra and not getattr(args, "takes_overrides", False):
            parser.parse_args(argv)  # argparse's own "unrecognized arguments" line, status 2
        args.overrides = extra
        results = sys.stdout
        quiet_third_party()
        with contextlib.redirect_stdout(sys.stderr):
            return report(lambda: args.execute(args, results), debug_enabled(args.debug))
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at devnull so that flush cannot raise too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
