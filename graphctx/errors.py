"""Errors with messages that name the file, row or setting at fault, and how entry points report them."""

from __future__ import annotations

import errno
import os
import sqlite3
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

DEBUG_ENV = "GRAPHCTX_DEBUG"


class GraphctxError(Exception):
    """Base class: a problem in the user's input or settings, reported without a traceback by the CLI."""


class DataError(GraphctxError):
    """A data file is missing, malformed, or leaves a split empty."""


class ConfigError(GraphctxError):
    """A configuration file or setting is invalid."""


class EndpointError(GraphctxError):
    """A remote service (the Wikidata SPARQL endpoint) failed or answered what cannot be read."""


class KnowledgeGraphUnavailable(EndpointError):
    """The knowledge-graph endpoint failed too many requests (``knowledge.sparql_max_failure_share``)."""


def check_output_folder(folder: Path, setting: str) -> None:
    """A :class:`ConfigError` naming ``setting`` when the output ``folder`` is a file or lies in one (where
    creating it would end in ``FileExistsError`` / ``NotADirectoryError``)."""
    existing = next((path for path in (folder, *folder.parents) if path.exists()), None)
    if existing is not None and not existing.is_dir():
        where = "is" if existing == folder else f"lies in {existing}, which is"
        raise ConfigError(f"{setting}: {folder} {where} a file, not a folder")


def disk_full(error: BaseException) -> str | None:
    """What ran out of space when ``error`` (or an exception it was raised from) is a full disk: an
    ``OSError`` with ``ENOSPC`` or "No space left on device" (pyarrow's), or SQLite's "database or disk is
    full"; the file named when the error names one. None for any other error."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = str(error)
        if isinstance(error, OSError) and (error.errno == errno.ENOSPC or "No space left" in text):
            return f"{error.filename}: no space left on device" if error.filename else text
        if isinstance(error, sqlite3.OperationalError) and "disk is full" in text:
            return f"SQLite: {text}"
        error = error.__cause__ or error.__context__
    return None


def debug_enabled(flag: bool = False) -> bool:
    """``--debug`` was given or ``GRAPHCTX_DEBUG`` is set to something other than empty or ``0``."""
    return flag or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def report(
    command: Callable[[], int], debug: bool, hint: Callable[[GraphctxError], str | None] = lambda e: None
) -> int:
    """``command()``'s exit status; a :class:`GraphctxError` it raises becomes one ``error: ...`` line on
    stderr (and an optional hint line) and status 1, with the traceback before it when ``debug``. So does a
    full disk (:func:`disk_full`), named as such; any other exception propagates."""
    try:
        return command()
    except GraphctxError as error:
        if debug:
            traceback.print_exc(file=sys.stderr)
        print(f"error: {error}", file=sys.stderr)
        extra = hint(error)
        if extra:
            print(extra, file=sys.stderr)
        return 1
    except Exception as error:
        full = disk_full(error)
        if full is None:
            raise
        if debug:
            traceback.print_exc(file=sys.stderr)
        print(
            f"error: disk full: {full}; free space there or point the cache (cache_dir, --cache_dir) or the "
            "output folder elsewhere (nothing half-written is read back)",
            file=sys.stderr,
        )
        return 1
