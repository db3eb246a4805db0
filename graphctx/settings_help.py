"""``-h/--help`` for commands that take ``--config``: the usual help, then every config setting with its
documentation (imported only when help is asked for, so the commands still start fast)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


class HelpWithSettings(argparse.Action):
    """Print the parser's help and :func:`graphctx.config.settings_help`, then exit."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from graphctx.config import settings_help

        parser.print_help()
        print("\n" + settings_help())
        parser.exit()


def add_settings_help(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` (made with ``add_help=False``) a ``-h/--help`` of :class:`HelpWithSettings`."""
    parser.add_argument(
        "-h",
        "--help",
        action=HelpWithSettings,
        help="show this help and every config setting with its documentation, then exit",
    )
