"""The pool embedding in shards: contiguous slices of the pool's questions, each embedded and cached on its
own (:func:`~graphctx.retrieval.builders.build_embeddings`, an atomic cache entry keyed by the slice's
texts), by any number of processes (ranks of one job, tasks of a SLURM array) and then merged in pool order.

A shard already in the cache is never embedded again, so a stopped or preempted run resumes where it was.
The merged matrix is written to the cache entry of the whole pool's embeddings, where
:func:`~graphctx.retrieval.index.build_index` reads it (rows equal a single pass's up to the encoder's
batching, which its cache key leaves out too).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch
from torch import Tensor

from graphctx.cache import atomic_path
from graphctx.errors import ConfigError
from graphctx.retrieval.builders import build_embeddings, embedding_identity
from graphctx.retrieval.embeddings import embedding_cache_path
from graphctx.retrieval.settings import RetrievalSettings

WORKER_ENV = (
    ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"),
    ("RANK", "WORLD_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
)
"""Where a process finds its worker number and the worker count, first match wins: a SLURM array task, a
torchrun/Lightning rank, a task of ``srun`` (an array's task numbers count from ``SLURM_ARRAY_TASK_MIN``)."""


def shard_slices(count: int, shards: int) -> list[slice]:
    """``shards`` contiguous slices of ``count`` rows, sizes differing by at most one.

    Examples:
        >>> shard_slices(7, 3)
        [slice(0, 2, None), slice(2, 4, None), slice(4, 7, None)]
    """
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    bounds = [count * part // shards for part in range(shards + 1)]
    return [slice(bounds[part], bounds[part + 1]) for part in range(shards)]


def worker_shards(shards: int, env: Mapping[str, str] = os.environ) -> list[int]:
    """The shards of this process: ``rank, rank + world, ...`` with ``(rank, world)`` from
    :data:`WORKER_ENV` (``(0, 1)`` when none is set).

    Examples:
        >>> worker_shards(5, {"RANK": "1", "WORLD_SIZE": "2"})
        [1, 3]
    """
    rank, world = 0, 1
    for rank_key, world_key in WORKER_ENV:
        if rank_key in env:
            first = int(env.get("SLURM_ARRAY_TASK_MIN", "0")) if rank_key == "SLURM_ARRAY_TASK_ID" else 0
            rank, world = int(env[rank_key]) - first, int(env.get(world_key, "1"))
            break
    if not 0 <= rank < world:
        raise ConfigError(
            f"{rank_key}={rank}, {world_key}={world}: the worker number must be below the count"
        )
    return list(range(rank, shards, world))


def cache_entry(texts: Sequence[str], settings: RetrievalSettings, cache_dir: str | None) -> Path:
    """The embedding cache file of ``texts`` under the settings
    (:func:`~graphctx.retrieval.embeddings.embedding_cache_path`)."""
    return embedding_cache_path(
        texts, settings.embedding_model, cache_dir=cache_dir, **embedding_identity(settings)
    )


def embed_shards(
    texts: Sequence[str],
    settings: RetrievalSettings,
    cache_dir: str | None,
    shards: int,
    which: Iterable[int],
) -> list[int]:
    """Embed (and cache) the shards ``which`` of the pool ``texts`` that are not cached yet; return those
    embedded."""
    slices, embedded = shard_slices(len(texts), shards), []
    for part in which:
        piece = texts[slices[part]]
        if piece and not cache_entry(piece, settings, cache_dir).is_file():
            build_embeddings(piece, settings, cache_dir=cache_dir)
            embedded.append(part)
    return embedded


def merge_shards(
    texts: Sequence[str], settings: RetrievalSettings, cache_dir: str | None, shards: int
) -> tuple[Tensor, list[int]]:
    """The pool's embeddings from its ``shards`` (embedding those still missing here), written to the whole
    pool's embedding cache entry; also the shards this call embedded."""
    embedded = embed_shards(texts, settings, cache_dir, shards, range(shards))
    slices = [part for part in shard_slices(len(texts), shards) if part.stop > part.start]
    merged = torch.cat([build_embeddings(texts[part], settings, cache_dir=cache_dir) for part in slices])
    with atomic_path(cache_entry(texts, settings, cache_dir)) as tmp:
        torch.save(merged, tmp)
    return merged, embedded
