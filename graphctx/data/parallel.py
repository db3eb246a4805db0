"""Map a function over a stream in a pool of worker processes, in order, with bounded work in flight."""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice
from typing import TypeVar

from graphctx.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")

CHUNK_ITEMS = 128
"""Items per task: large enough to amortise pickling and scheduling, small enough to keep memory low."""
CHUNKS_PER_WORKER = 2
"""Chunks in flight per worker: one running, one queued, so no worker waits for the next."""


def resolve_workers(workers: int | None, setting: str) -> int:
    """The number of processes for ``workers``: null means every core this process may run on."""
    if workers is None:
        return len(os.sched_getaffinity(0))
    if workers < 1:
        raise ConfigError(f"{setting}: {workers} must be at least 1, or null for one per core")
    return workers


def ordered_map(
    func: Callable[[T], R],
    items: Iterable[T],
    workers: int,
    preload: Sequence[str] = (),
    chunk_items: int = CHUNK_ITEMS,
) -> Iterator[R]:
    """``func(item)`` for every item, in the order of ``items``.

    With ``workers == 1`` this is plain ``map`` in this process. Otherwise chunks of ``chunk_items`` go to
    a pool of ``workers`` processes (``func`` must pickle: a module-level function or a ``partial`` of
    one), at most ``CHUNKS_PER_WORKER * workers`` chunks in flight, so memory does not grow with the
    stream. Workers fork from a forkserver, not from this process: forking after torch or Lightning
    started threads can deadlock. The forkserver starts once per process and imports ``preload`` (the
    modules ``func`` needs), so later pools start in milliseconds. An exception in ``func`` is raised
    here; closing the iterator early (an error downstream, Ctrl-C) cancels queued chunks and shuts the
    pool down.
    """
    if workers == 1:
        yield from map(func, items)
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["__main__", *preload])
    in_flight: deque[Future[list[R]]] = deque()
    pool = ProcessPoolExecutor(workers, mp_context=context)
    try:
        for chunk in _chunks(items, chunk_items):
            in_flight.append(pool.submit(_map_chunk, func, chunk))
            if len(in_flight) >= CHUNKS_PER_WORKER * workers:
                yield from in_flight.popleft().result()
        while in_flight:
            yield from in_flight.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` items (the last one shorter)."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _map_chunk(func: Callable[[T], R], chunk: list[T]) -> list[R]:
    """One task in a worker: ``func`` over a chunk."""
    return [func(item) for item in chunk]
