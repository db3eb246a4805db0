"""The ``graphctx`` console script: one subcommand per module in :mod:`graphctx.commands`.

Every subcommand that reads a config takes ``--config`` and any setting of it as ``--section.key VALUE``
(``graphctx plan --config configs/tiny.yaml --retrieval.top_k 3``), parsed as train.py and evaluate.py
parse them. Results go to stdout and nothing else does: what libraries print while the command runs
(``--json`` included) goes to stderr. graphctx's own errors end the command with one ``error: ...`` line
and exit status 1; ``--debug`` (or ``GRAPHCTX_DEBUG=1``) shows the traceback as well.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
from collections.abc import Sequence
from types import ModuleType

from jsonargparse import ArgumentParser

from graphctx.command_line import HelpFormatter, add_version, command_parser, old_spelling, parse
from graphctx.errors import debug_enabled, report
from graphctx.quiet import quiet_third_party

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
    "cache",
)
"""Subcommand names; each is the module of :mod:`graphctx.commands` of that name, ``-`` read as ``_``."""


def summary(docstring: str) -> str:
    """A subcommand's one-line help: the first sentence of its module docstring, whole (lines joined)."""
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    return re.match(r"(.+?[.])(?:\s|$)", paragraph + " ").group(1)


def build_parser() -> ArgumentParser:
    """The top-level parser: ``--debug``, ``--version`` and the subcommand's name (each subcommand parses
    the rest of the command line with its own parser, :func:`subcommand_parser`)."""
    parser = ArgumentParser(prog="graphctx", description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    add_version(parser)
    subcommands = parser.add_subcommands(dest="command", required=True)
    for name in COMMANDS:
        doc = command_module(name).__doc__
        subcommands.add_subcommand(name, ArgumentParser(prog=f"graphctx {name}"), help=summary(doc))
    return parser


def command_module(name: str) -> ModuleType:
    """The module of subcommand ``name`` (its import is light: what it runs is imported in ``execute``)."""
    return importlib.import_module(f"graphctx.commands.{name.replace('-', '_')}")


def subcommand_parser(name: str, help_asked: bool = False) -> ArgumentParser:
    """The parser of subcommand ``name``: its options, and the config's where it reads one."""
    module = command_module(name)
    parser = command_parser(f"graphctx {name}", module.__doc__, module.add_arguments, help_asked)
    parser.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; its return value is the exit status. The arguments up
    to the subcommand's name are graphctx's (``--debug``, ``--version``, ``--help``), the rest the
    subcommand's. A reader that closes the pipe early (``graphctx data --help | head``) ends the command
    quietly."""
    argv = list(sys.argv[1:] if argv is None else argv)
    at = next((i for i, arg in enumerate(argv) if not arg.startswith("-")), len(argv))
    own, rest = argv[: at + 1], argv[at + 1 :]
    try:
        top = build_parser().parse_args(own)
        debug = debug_enabled(top.debug or "--debug" in rest)
        return report(lambda: run(top.command, rest), debug)
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at devnull so that flush cannot raise too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def run(name: str, argv: list[str]) -> int:
    """Parse ``argv`` with subcommand ``name``'s parser and run it: results to stdout, all else to
    stderr. An option of an older release (the module's ``RENAMED``) is one line naming the config key, exit
    status 2."""
    if refused := old_spelling(f"graphctx {name}", argv, getattr(command_module(name), "RENAMED", {})):
        print(refused, file=sys.stderr)
        return 2
    help_asked = bool({"-h", "--help"} & set(argv))
    args = parse(subcommand_parser(name, help_asked), argv)
    results = sys.stdout
    quiet_third_party()
    with contextlib.redirect_stdout(sys.stderr):
        return command_module(name).execute(args, results)


if __name__ == "__main__":
    sys.exit(main())
