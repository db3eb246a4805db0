"""Config settings documented from their attribute docstrings, as ``--help`` shows them.

Reading the docstrings costs about a second per parser (``benchmarks/help_docstrings.py``), so only
``--help`` turns it on; a run that loads a config does not pay it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from jsonargparse import set_parsing_settings


@contextmanager
def field_docstrings() -> Iterator[None]:
    """Parsers built inside take each settings field's help from its attribute docstring."""
    set_parsing_settings(docstring_parse_attribute_docstrings=True)
    try:
        yield
    finally:
        set_parsing_settings(docstring_parse_attribute_docstrings=False)  # jsonargparse's default
