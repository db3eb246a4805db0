"""An evaluation's progress lines on stderr and its seconds per stage."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator

from graphctx.pipeline.processes import Processes


def stderr_logger(processes: Processes) -> Callable[[str], None]:
    """Progress lines on stderr, stamped with the seconds since the run started (and the rank, if many)."""
    started = time.perf_counter()
    rank = f" rank {processes.rank}/{processes.world_size}" if processes.world_size > 1 else ""

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s{rank}] {message}", file=sys.stderr, flush=True)

    return log


class StageTimer(dict[str, float]):
    """Seconds this process spent per stage (contexts, answers, scores), stage by name."""

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Add the wall time of the block under ``name``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self[name] = self.get(name, 0.0) + time.perf_counter() - started

    def summary(self) -> str:
        return "stage seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.items())
