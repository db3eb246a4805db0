"""Bounded SPARQL requests: run batches a few at a time, split a batch that keeps failing, account for loss.

A batch is whatever one request asks (surfaces, or heads × tails); ``send`` turns it into rows (the
client has already retried it with backoff), ``split`` into smaller batches. A batch that still fails is
split and its halves are sent; one that cannot be split any more is *lost*: the caller records what it
held, and since nothing of it is cached, the next run asks again. The run stops only when the endpoint as
a whole fails: more than ``max_failure_share`` of the first requests of batches fail, or no request at
all succeeds (either once a few were sent); a few entities that keep failing are lost, not fatal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from graphctx.errors import KnowledgeGraphUnavailable

B = TypeVar("B")
R = TypeVar("R")

MIN_REQUESTS_FOR_SHARE = 4
"""Requests sent before the failure share may stop the run (one failed request is not an outage)."""


@dataclass
class RequestStats:
    """What the knowledge stage asked of its backend (summed over every call)."""

    sparql_requests: int = 0
    """Requests sent (first tries of every batch, split halves included; client retries not counted)."""
    retried: int = 0
    """Client retries after a 429, 5xx, timeout or dropped connection."""
    split_requests: int = 0
    """Batches that failed after their retries and were split in two."""
    failed_requests: int = 0
    """Requests that failed after their retries (split or lost)."""
    malformed_responses: int = 0
    """Responses that were not SPARQL JSON results (counted apart, also failures)."""
    cache_hits: int = 0
    """Entities (surfaces, heads) answered from the on-disk cache without a request."""
    lost_entities: int = 0
    """Entities whose lookup failed even as a batch of one (recorded per query, retried next run)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, count: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + count)

    def to_json(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


@dataclass
class BatchOutcome(Generic[B, R]):
    """Answered batches with their rows, and batches lost (could not be split further)."""

    done: list[tuple[B, R]]
    lost: list[tuple[B, str]]
    """(batch, last error message)."""


def run_batches(
    batches: Sequence[B],
    send: Callable[[B], R],
    split: Callable[[B], list[B]],
    *,
    parallel: int,
    stats: RequestStats,
    max_failure_share: float,
    source: str,
    failure_types: tuple[type[BaseException], ...],
    on_done: Callable[[B, R], None] | None = None,
) -> BatchOutcome[B, R]:
    """Send ``batches`` with at most ``parallel`` in flight; see the module docstring.

    Raises :class:`~graphctx.errors.KnowledgeGraphUnavailable` once more than ``max_failure_share`` of the
    requests sent (at least :data:`MIN_REQUESTS_FOR_SHARE`) have failed. ``on_done`` sees each answered
    batch as it arrives, in the calling thread (e.g. to cache it at once).
    """
    run: _BatchRun[B, R] = _BatchRun(split, stats, max_failure_share, source, failure_types, on_done)
    run.queue = [(batch, True) for batch in batches]
    width = max(1, parallel)
    with ThreadPoolExecutor(max_workers=width) as pool:
        running: dict[Future[R], tuple[B, bool]] = {}
        while run.queue or running:
            while run.queue and len(running) < width:
                batch, first = run.queue.pop(0)
                running[pool.submit(send, batch)] = (batch, first)
                run.sent += 1
                run.first_sent += first
                stats.add("sparql_requests")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                batch, first = running.pop(future)
                run.settle(future, batch, first, running)
    return run.outcome


@dataclass
class _BatchRun(Generic[B, R]):
    """The state of one :func:`run_batches` call: what is queued, what came back, and the failure tally
    (``first_*``: the first requests of batches, split halves not counted)."""

    split: Callable[[B], list[B]]
    stats: RequestStats
    max_failure_share: float
    source: str
    failure_types: tuple[type[BaseException], ...]
    on_done: Callable[[B, R], None] | None
    queue: list[tuple[B, bool]] = field(default_factory=list)
    outcome: BatchOutcome[B, R] = field(default_factory=lambda: BatchOutcome([], []))
    sent: int = 0
    failed: int = 0
    first_sent: int = 0
    first_failed: int = 0

    def settle(
        self, future: Future[R], batch: B, first: bool, running: dict[Future[R], tuple[B, bool]]
    ) -> None:
        """Record the answered ``batch``; or count its failure, then stop the run if the endpoint as a whole
        fails (cancelling the ``running`` requests), else queue its halves, or lose it when it cannot be
        split."""
        try:
            rows = future.result()
            self.outcome.done.append((batch, rows))
            if self.on_done is not None:
                self.on_done(batch, rows)
            return
        except self.failure_types as error:
            self.failed += 1
            self.first_failed += first
            self.stats.add("failed_requests")
            message = str(error)
        share = self.first_failed / self.first_sent
        if (self.first_sent >= MIN_REQUESTS_FOR_SHARE and share > self.max_failure_share) or (
            self.sent >= MIN_REQUESTS_FOR_SHARE and self.failed == self.sent
        ):
            for other in running:
                other.cancel()
            raise KnowledgeGraphUnavailable(
                f"{self.source}: {self.failed} of {self.sent} SPARQL requests failed, over "
                f"knowledge.sparql_max_failure_share={self.max_failure_share}; last error: {message}"
            )
        pieces = self.split(batch)
        if len(pieces) > 1:
            self.stats.add("split_requests")
            self.queue.extend((piece, False) for piece in pieces)
        else:
            self.outcome.lost.append((batch, message))


def halves(items: Sequence[str]) -> list[list[str]]:
    """``items`` in two halves (one piece when it holds a single item)."""
    middle = (len(items) + 1) // 2
    return [list(items[:middle]), list(items[middle:])] if len(items) > 1 else [list(items)]


def chunks(items: Sequence[str], size: int) -> list[list[str]]:
    """Consecutive pieces of at most ``size`` items."""
    return [list(items[start : start + size]) for start in range(0, len(items), max(1, size))]
