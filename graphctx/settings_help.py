"""``-h/--help`` for commands that take ``--config``: the usual help, then every config setting with its
documentation (imported only when help is asked for, so the commands still start fast)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any


def every_setting() -> str:
    """:func:`graphctx.pipeline.config_file.settings_help`: every section of the config."""
    from graphctx.pipeline.config_file import settings_help

    return settings_help()


class HelpWithSettings(argparse.Action):
    """Print the parser's help and what ``describe()`` says of the config settings, then exit."""

    def __init__(
        self,
        option_strings: Sequence[str],
        describe: Callable[[], str],
        dest: str = argparse.SUPPRESS,
        **kwargs: Any,
    ) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, nargs=0, **kwargs)
        self.describe = describe

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        parser.print_help()
        print("\n" + self.describe())
        parser.exit()


def add_settings_help(parser: argparse.ArgumentParser, describe: Callable[[], str] = every_setting) -> None:
    """Give ``parser`` (made with ``add_help=False``) a ``-h/--help`` of :class:`HelpWithSettings`;
    ``describe``: the settings the command reads (default: every config setting)."""
    parser.add_argument(
        "-h",
        "--help",
        action=HelpWithSettings,
        describe=describe,
        help="show this help and the config settings it reads with their documentation, then exit",
    )
