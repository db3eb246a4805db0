"""Errors with messages that name the file, row or setting at fault, and how entry points report them."""

from __future__ import annotations

import os
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


def debug_enabled(flag: bool = False) -> bool:
    """``--debug`` was given or ``GRAPHCTX_DEBUG`` is set to something other than empty or ``0``."""
    return flag or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def report(
    run: Callable[[], int], debug: bool, hint: Callable[[GraphctxError], str | None] = lambda e: None
) -> int:
    """``run()``'s exit status; a :class:`GraphctxError` it raises becomes one ``error: ...`` line on stderr
    (and an optional hint line) and status 1, with the traceback before it when ``debug``."""
    try:
        return run()
    except GraphctxError as error:
        if debug:
            traceback.print_exc(file=sys.stderr)
        print(f"error: {error}", file=sys.stderr)
        extra = hint(error)
        if extra:
            print(extra, file=sys.stderr)
        return 1
