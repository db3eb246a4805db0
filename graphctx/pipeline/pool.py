"""The retrieval pool's index and retriever, for the commands that only retrieve (``graphctx index``,
``retrieve``, ``genqa``): light to import (no Lightning, no knowledge stage), shared with
:class:`~graphctx.pipeline.contexts.ContextBuilder`."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from graphctx.retrieval.index import RetrievalIndex, build_index
from graphctx.retrieval.registry import PoolView, entry_named, retriever_entries
from graphctx.retrieval.retriever import Retriever
from graphctx.retrieval.settings import RetrievalSettings

POOL_FILE = "pool.jsonl"
"""A live pool folder's rows (:mod:`graphctx.serve.live_pool`)."""
INDEXES_FILE = "indexes.json"
"""A live pool folder's list of the index entries its updates wrote."""


def pool_index(
    pool: Iterable[Mapping[str, Any]], settings: RetrievalSettings, cache_dir: str | None
) -> RetrievalIndex:
    """The index of the retrieval pool's questions (embedded, and their graph for ``graph``): built once,
    then read from the cache."""
    rows = {int(row["id"]): row for row in pool}
    return build_index(list(rows), [row["question"] for row in rows.values()], settings, cache_dir)


def pool_retriever(
    pool: Iterable[Mapping[str, Any]], settings: RetrievalSettings, cache_dir: str | None
) -> Retriever:
    """The ``settings.method`` retriever (:mod:`graphctx.retrieval.registry`) over the pool, in this
    process."""
    rows = {int(row["id"]): row for row in pool}
    entry = entry_named(retriever_entries(settings), settings.method, "retrieval.method")

    def index(method: str) -> RetrievalIndex:
        return pool_index(rows.values(), dataclasses.replace(settings, method=method), cache_dir)

    return entry.build(PoolView(list(rows), [row["question"] for row in rows.values()], index))
