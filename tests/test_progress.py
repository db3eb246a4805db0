"""graphctx.progress: the line a person reads (done/total, elapsed, time left), on a terminal and in a log."""

from __future__ import annotations

import io

import pytest

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
    assert lines == [  # the end's line is the last one written: not written twice
        "progress: answers (adapter model): 0/40 rows (0%), elapsed 0:00:00, left ?",
        "progress: answers (adapter model): 20/40 rows (50%), elapsed 0:00:35, left ~0:00:35, FineTuned "
        "batch 2 done",
    ]


def test_time_left_from_expected_durations_and_the_rate_where_one_is_unknown() -> None:
    clock, log = Clock(), io.StringIO()
    with Progress(
        "reproduce", 3, "stages", stream=log, every_s=0, clock=clock, expected_s=[50, None, 30]
    ) as progress:
        progress.advance(0, "running a (stage 1 of 3)")  # b's time unknown, no rate yet: left unknown
        clock.now += 20
        progress.advance(1, "running b (stage 2 of 3)")  # b at a's rate (20 s), c as recorded (30 s)
        clock.now += 5
        progress.advance(1, "running c (stage 3 of 3)")  # c as recorded
        clock.now += 30
        progress.advance(1, "c done")
    assert log.getvalue().splitlines() == [
        "progress: reproduce: 0/3 stages (0%), elapsed 0:00:00, left ?",
        "progress: reproduce: 0/3 stages (0%), elapsed 0:00:00, left ?, running a (stage 1 of 3)",
        "progress: reproduce: 1/3 stages (33%), elapsed 0:00:20, left ~0:00:50, running b (stage 2 of 3)",
        "progress: reproduce: 2/3 stages (66%), elapsed 0:00:25, left ~0:00:30, running c (stage 3 of 3)",
        "progress: reproduce: 3/3 stages (100%), elapsed 0:00:55, left 0:00:00, c done",
    ]


def test_plain_lines_on_a_terminal_when_asked() -> None:
    clock, tty = Clock(), Tty()
    with Progress("reproduce", 1, "stages", stream=tty, every_s=0, clock=clock, redraw=False) as progress:
        clock.now += 3
        progress.advance()
    assert tty.getvalue().splitlines() == [
        "progress: reproduce: 0/1 stages (0%), elapsed 0:00:00, left ?",
        "progress: reproduce: 1/1 stages (100%), elapsed 0:00:03, left 0:00:00",
    ]


def test_expected_durations_must_be_one_per_item() -> None:
    with pytest.raises(ValueError, match=r"^progress of reproduce: 1 expected durations for 2 items$"):
        Progress("reproduce", 2, "stages", stream=io.StringIO(), expected_s=[1.0])


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
