"""Config settings documented from their attribute docstrings, as ``--help`` shows them.

Reading the docstrings costs about a second per parser (``benchmarks/help_docstrings.py``), so only
``--help`` turns it on; a run that loads a config does not pay it. Imports jsonargparse alone, so a
command can document its own section without importing the config layer and the libraries behind it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from jsonargparse import ArgumentParser, set_parsing_settings


@contextmanager
def field_docstrings() -> Iterator[None]:
    """Parsers built inside take each settings field's help from its attribute docstring."""
    set_parsing_settings(docstring_parse_attribute_docstrings=True)
    try:
        yield
    finally:
        set_parsing_settings(docstring_parse_attribute_docstrings=False)  # jsonargparse's default


def settings_text(parser: ArgumentParser) -> str:
    """``parser``'s help without its usage and first option group (``-h``, ``--config``, ``--trainer``)."""
    text = parser.format_help()
    return text[text.index("\n\n", text.index("options:")) + 2 :]


def section_help(settings_class: type, key: str) -> str:
    """The settings of one dataclass under the dotted YAML ``key`` (e.g. ``data.dataset``), documented."""
    with field_docstrings():
        parser = ArgumentParser()
        parser.add_class_arguments(settings_class, key)
        return settings_text(parser)
