"""graphctx.progress: the line a person reads (done/total, elapsed, time left), on a terminal and in a log."""

from __future__ import annotations

import io

from graphctx.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_log_lines_are_throttled_and_estimate_time_left() -> None:
    clock, log = Clock(), io.StringIO()
    with Progress("answers (adapter model)", 40, stream=log, every_s=30, clock=clock) as progress:
        clock.now += 10
        progress.advance(10, "FineTuned batch 1 done")  # within 30 s of the first line: not written
        clock.now += 25
        progress.advance(10, "FineTuned batch 2 done")
    lines = log.getvalue().splitlines()
    assert lines == [
        "answers (adapter model): 0/40 rows (0%), elapsed 0:00:00, left ?",
        "answers (adapter model): 20/40 rows (50%), elapsed 0:00:35, left ~0:00:35, FineTuned batch 2 done",
        "answers (adapter model): 20/40 rows (50%), elapsed 0:00:35, left ~0:00:35, FineTuned batch 2 done",
    ]


def test_terminal_redraws_one_line_and_ends_it() -> None:
    clock, tty = Clock(), Tty()
    progress = Progress("scores (rouge)", 2, stream=tty, clock=clock)
    clock.now += 1
    progress.advance()
    clock.now += 1
    progress.advance()
    progress.close()
    progress.close()  # idempotent
    text = tty.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")
    assert text.count("\r\x1b[K") == 4
    assert (
        text.rstrip("\n").rsplit("\r\x1b[K", 1)[1]
        == "scores (rouge): 2/2 rows (100%), elapsed 0:00:02, left 0:00:00"
    )
