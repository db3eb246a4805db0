"""How every entry point reads its command line: one jsonargparse parser per command, holding the command's
own options and, for a command that reads a config, the config's (``--config`` and every key of it as a
``--section.key VALUE`` override, :func:`graphctx.pipeline.config_file.add_config_arguments`).

A command's parser is built only when the command runs; ``--help`` then documents every setting from its
docstring (:func:`graphctx.settings_docs.field_docstrings`, about a second, so only for ``--help``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import re
from argparse import ArgumentError
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version

from jsonargparse import ArgumentParser, DefaultHelpFormatter

from graphctx.errors import ConfigError

RENAMED: dict[str, str] = {
    "--cache-dir": "--cache_dir",
    "--top-k": "--retrieval.top_k",
    "--adapter": "--evaluation.adapter",
}
"""Options of older releases -> the config key that replaced them (one spelling for each setting)."""
NO_CONFIG = "This command reads no config, so it takes no --config and no --section.key settings."
"""The last line of the help of a command that reads no config."""
OVERRIDES = "--section.key VALUE"
INFORMATIONAL = ("-h", "--help", "--version")
"""Options that print and exit before anything is required."""


class HelpFormatter(DefaultHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """jsonargparse's help, with descriptions printed as written (their paragraphs and lists kept)."""


def package_version() -> str:
    """graphctx's installed version (``importlib.metadata``)."""
    try:
        return version("graphctx")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def add_version(parser: argparse.ArgumentParser) -> None:
    """``--version``: print ``<prog> <graphctx's version>`` and exit."""
    shown = f"%(prog)s {package_version()}"
    parser.add_argument("--version", action="version", version=shown, help="print the version and exit")


def check_renamed(argv: Sequence[str]) -> None:
    """Refuse an option of an older release in one line naming its new spelling."""
    for arg in argv:
        name = arg.partition("=")[0]
        if name in RENAMED:
            raise ConfigError(f"{name}: renamed {RENAMED[name]} (the config key's spelling)")


def old_spelling(prog: str, argv: Sequence[str], renamed: dict[str, str]) -> str | None:
    """The one line refusing the first option of ``argv`` that ``renamed`` (a command's options of older
    releases -> the config key that replaced them) names; None: there is none."""
    for arg in argv:
        name = arg.partition("=")[0]
        if name in renamed:
            return f"{prog}: {name} is now {renamed[name]}"
    return None


def command_parser(
    prog: str, description: str, add_arguments: Callable[[ArgumentParser], None], help_asked: bool
) -> ArgumentParser:
    """The parser of one command: ``add_arguments`` adds its options (and, for a command that reads a
    config, :func:`add_config`); one that reads none says so at the end of its help. ``help_asked``: the
    settings' help is read from their docstrings."""
    parser = ArgumentParser(prog=prog, description=description, formatter_class=HelpFormatter)
    with field_docstrings_if(help_asked):
        add_arguments(parser)
    if not (reads_config(parser) or parser._subcommands_action) and parser.epilog is None:
        parser.epilog = NO_CONFIG
    return parser


def reads_config(parser: ArgumentParser) -> bool:
    """Whether ``parser`` holds a config's keys (:func:`add_config`)."""
    return "--cache_dir" in parser._option_string_actions


def field_docstrings_if(asked: bool) -> contextlib.AbstractContextManager[None]:
    """:func:`graphctx.settings_docs.field_docstrings` when ``asked``."""
    from graphctx.settings_docs import field_docstrings

    return field_docstrings() if asked else contextlib.nullcontext()


def add_config(parser: ArgumentParser, what: str, required: bool = True) -> None:
    """``--config`` (``what``: its help) and every config key as a ``--section.key VALUE`` override, parsed
    as train.py parses them; the usage line stays short (the keys are listed in ``--help``)."""
    from graphctx.pipeline.config_file import add_config_arguments

    add_config_arguments(parser, required, f"{what}; any setting of it can be given as {OVERRIDES}")
    config = "--config CONFIG" if required else "[--config CONFIG]"
    parser.usage = f"{parser.prog} {config} [options] [{OVERRIDES} ...]"


def parse(parser: ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` parsed by ``parser`` after refusing renamed and moved options. A problem with a config
    setting (in the file or a ``--section.key`` override: a mistyped key, a wrong value) is one
    :class:`ConfigError` naming the file and the key; one with the command's own options is jsonargparse's
    usage error (status 2)."""
    check_renamed(argv)
    config = parser._option_string_actions.get("--config")
    given = any(arg in ("--config", *INFORMATIONAL) or arg.startswith("--config=") for arg in argv)
    if config is not None and config.required and not given:
        parser.error("the following arguments are required: --config")  # not the keys it would give
    if not reads_config(parser):
        return parser.parse_args(list(argv))
    from graphctx.pipeline.config_file import CONFIG_KEYS, check_moved_keys

    check_moved_keys({}, argv)
    parser.exit_on_error = False
    try:
        return parser.parse_args(list(argv))
    except ArgumentError as error:
        message = " ".join(str(error).split())  # one line: jsonargparse indents its details below
        if not re.search(rf"\b({'|'.join(CONFIG_KEYS)})\b", message):
            parser.exit_on_error = True
            parser.error(message, error)
        files = [value for flag, value in itertools.pairwise(argv) if flag == "--config"]
        raise ConfigError(f"{files[-1]}: {message}" if files else message) from error
