"""The retrieval pool's index and retriever, for the commands that only retrieve (``graphctx index``,
``retrieve``, ``genqa``): light to import (no Lightning, no knowledge stage), shared with
:class:`~graphctx.pipeline.contexts.ContextBuilder`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from graphctx.retrieval.index import RetrievalIndex, build_index
from graphctx.retrieval.retriever import EmbeddingRetriever, build_retriever
from graphctx.retrieval.settings import RetrievalSettings


def pool_index(
    pool: Iterable[Mapping[str, Any]], settings: RetrievalSettings, cache_dir: str | None
) -> RetrievalIndex:
    """The index of the retrieval pool's questions (embedded, and their graph for ``graph``): built once,
    then read from the cache."""
    rows = {int(row["id"]): row for row in pool}
    return build_index(list(rows), [row["question"] for row in rows.values()], settings, cache_dir)


def pool_retriever(
    pool: Iterable[Mapping[str, Any]], settings: RetrievalSettings, cache_dir: str | None
) -> EmbeddingRetriever:
    """The ``settings.method`` retriever over the pool's :func:`pool_index`, in this process."""
    return build_retriever(pool_index(pool, settings, cache_dir), settings)
