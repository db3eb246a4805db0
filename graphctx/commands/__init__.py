"""Subcommands of the ``graphctx`` console script, one module each."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from graphctx.errors import ConfigError

STDIN = "-"
"""``--question -``: read the question from stdin."""


def wrote(out: TextIO, paths: Sequence[str | Path], json_mode: bool = False, verb: str = "wrote") -> None:
    """A command's last line, naming what it wrote: ``wrote: a/results.md, a/results.csv and a/trec``. On
    stdout with its results; with ``--json`` on stderr, so that stdout stays one JSON document."""
    names = [str(path) for path in paths] or ["nothing"]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    print(f"{verb}: {listed}", file=sys.stderr if json_mode else out)


def add_question_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--question TEXT`` (``-``: stdin) or ``--question-file PATH``, one of them required."""
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--question", help=f"{what}; '-' reads it from stdin (UTF-8)")
    given.add_argument(
        "--question-file", help="read the question from this UTF-8 file (for questions too long for argv)"
    )


def read_question(args: argparse.Namespace) -> str:
    """The question of ``--question`` / ``--question-file``, refused in one line when it is empty or not
    UTF-8 text; a question read from stdin or a file loses its trailing newline."""
    if args.question_file is not None:
        source, path = f"--question-file {args.question_file}", Path(args.question_file)
        if not path.is_file():
            raise ConfigError(f"{source}: {'is a folder' if path.is_dir() else 'no such file'}")
        text = _decode(path.read_bytes(), source)
    elif args.question == STDIN:
        source = "--question - (stdin)"
        text = _decode(sys.stdin.buffer.read(), source)
    else:
        source, text = "--question", args.question
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:  # argv bytes that are not UTF-8 arrive as lone surrogates
            byte = ord(text[error.start]) - 0xDC00
            raise ConfigError(
                f"--question: not UTF-8 text (byte 0x{byte:02x} at character {error.start}); pass it in "
                "UTF-8, or in a UTF-8 file with --question-file"
            ) from error
    text = text.rstrip("\r\n") if source != "--question" else text
    if not text.strip():
        raise ConfigError(f"{source}: the question is empty")
    return text


def _decode(data: bytes, source: str) -> str:
    """``data`` as UTF-8 (a byte-order mark is dropped), else one error naming the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{source}: not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}: "
            f"{error.reason}); convert it, e.g. iconv -f latin1 -t utf-8"
        ) from error
