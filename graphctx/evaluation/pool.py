"""The pool of past questions a config retrieves from: the training split of its dataset."""

from __future__ import annotations

import os
from typing import Any

import datasets

from graphctx.data import load_qa_dataset


def load_config_dataset(config: Any) -> datasets.DatasetDict:
    """The config's Q&A dataset, filtered exactly as for training (the model's tokenizer for the token
    limit), from the data cache."""
    settings = config.data.dataset
    tokenizer = None
    if settings.filters.max_tokens is not None:
        from graphctx.model import load_tokenizer

        tokenizer = load_tokenizer(config.model.spec)
    return load_qa_dataset(settings, config.data.cache_dir, tokenizer)


def cache_dir_of(config: Any, override: str | os.PathLike[str] | None = None) -> str | None:
    """``override``, else the config's ``data.cache_dir`` (None: ``$GRAPHCTX_CACHE``, ``.cache/graphctx``)."""
    return str(override) if override else config.data.cache_dir
