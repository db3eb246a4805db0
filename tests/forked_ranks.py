"""Forked processes as the ranks of a real multi-process (gloo) test: start them, wait, kill what hangs."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any


def run_forked_ranks(
    target: Callable[..., Any], rank_args: Sequence[tuple], timeout_s: float
) -> list[int | None]:
    """Run ``target(*rank_args[rank])`` in one forked process per rank (they inherit what the test built)
    and return their exit codes; a rank still running after ``timeout_s`` is killed (exit code -9)."""
    context = multiprocessing.get_context("fork")
    ranks = [context.Process(target=target, args=args) for args in rank_args]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(timeout=timeout_s)
        if process.is_alive():
            process.kill()
            process.join()
    return [process.exitcode for process in ranks]
