"""Paths built from configuration or input stay in the folder they belong to.

Every writer that puts a configured name (a site, a stage, a variant, an annotator) into a path joins it with
:func:`inside`, which refuses a name whose path would leave the folder (``/some/dir``, ``../../x``, a
symbolic link out); a site's name is checked at config load by :func:`check_site`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from graphctx.errors import ConfigError

SITE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]|\.(?!\.)){0,99}")
"""A site's name: a host-like token (``askubuntu``, ``unix.stackexchange.com``, ``cardano``): letters,
digits, ``.``, ``-`` and ``_``, starting with a letter or digit, no ``..``, at most 100 characters."""


def site_problem(name: str) -> str | None:
    """Why ``name`` is not a site's name (None: it is one)."""
    if isinstance(name, str) and SITE_NAME.fullmatch(name):
        return None
    return (
        f"{name!r} is not a site's name (a host-like token such as askubuntu or unix.stackexchange.com: "
        "letters, digits, '.', '-' and '_', starting with a letter or digit)"
    )


def check_site(name: str, where: str) -> str:
    """``name`` when it is a site's name, else a one-line :class:`ConfigError` naming ``where``."""
    problem = site_problem(name)
    if problem is not None:
        raise ConfigError(f"{where}: {problem}")
    return name


def inside(folder: str | os.PathLike[str], *names: str, where: str = "") -> Path:
    """``folder / names...``, refused in one line (naming ``where``, else the folder) when the result, links
    resolved, is not strictly inside ``folder``: an absolute name, a ``..`` that climbs out, a link out,
    ``folder`` itself."""
    base = Path(folder)
    path = base.joinpath(*names)
    root, resolved = base.resolve(), path.resolve()
    if (
        any(Path(name).is_absolute() for name in names)
        or resolved == root
        or not resolved.is_relative_to(root)
    ):
        raise ConfigError(
            f"{where or folder}: {os.path.join(*names)!r} would write outside {folder}; name a file inside it"
        )
    return path
