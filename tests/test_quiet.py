"""graphctx.quiet: every listed third-party warning is filtered, by its literal message."""

from __future__ import annotations

import warnings

import pytest

from graphctx.quiet import HARMLESS_WARNINGS, quiet_third_party


@pytest.mark.parametrize(("message", "category"), HARMLESS_WARNINGS)
def test_each_listed_warning_is_filtered(message: str, category: type[Warning]) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        quiet_third_party()
        warnings.warn(f"{message} and more of the library's text", category, stacklevel=1)
    assert caught == []


def test_a_warning_that_only_matches_as_a_regex_still_shows() -> None:
    """The messages are literal text: ``(`` in a listed message is not a regex group."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        quiet_third_party()
        warnings.warn("`isinstancetreespec, LeafSpec` is deprecated", FutureWarning, stacklevel=1)
    assert len(caught) == 1
