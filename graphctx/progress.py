"""Progress of one long stage a person can read: what runs, done/total, elapsed and time left.

On a terminal (the stream is a tty) one line is redrawn in place (``\\r``) at most every ``tty_every_s``
seconds and finished with a newline; in a plain log (a pipe, a file, a SLURM ``.out``) a ``progress:`` line
is written at most every ``every_s`` seconds, and always at the start and at the end (the end's line only
when the count or the note changed since the last one)::

    progress: answers (adapter model): 12/96 rows (12%), elapsed 0:00:41, left ~0:04:47, FineTuned batch 2

Time left is the rate so far extrapolated: left = elapsed · (total − done) / done (unknown before the
first step is done). Where the items' durations are known beforehand (``expected_s``, e.g. a stage's
recorded seconds), it is their sum over the items not done, left = Σ_{i ≥ done} e_i, each unknown e_i
taken as elapsed / done. ``redraw=False`` writes plain lines on a terminal too (for a stream that other
processes write to between the lines). ``clock`` is injectable so tests are deterministic.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TextIO

EVERY_S = 30.0
"""Plain logs: a line at most every 30 seconds (and at start and end)."""
TTY_EVERY_S = 0.5
"""Terminals: the line is redrawn at most twice a second."""


def clock_text(seconds: float) -> str:
    """``H:MM:SS`` of ``seconds``, rounded to the second."""
    return str(timedelta(seconds=round(max(seconds, 0.0))))


class Progress:
    """``done``/``total`` of one stage named ``what``, written to ``stream`` (default: stderr)."""

    def __init__(
        self,
        what: str,
        total: int,
        unit: str = "rows",
        *,
        stream: TextIO | None = None,
        every_s: float | None = None,
        tty_every_s: float = TTY_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        expected_s: Sequence[float | None] | None = None,
        redraw: bool | None = None,
    ) -> None:
        """``every_s``: the plain lines' interval (None: :data:`EVERY_S` as it is now); ``expected_s``: each
        item's expected seconds (None: unknown), ``total`` of them; ``redraw``: redraw one line in place
        (default: when ``stream`` is a terminal)."""
        if total < 0:
            raise ValueError(f"progress of {what}: total must be >= 0, got {total}")
        if expected_s is not None and len(expected_s) != total:
            raise ValueError(f"progress of {what}: {len(expected_s)} expected durations for {total} items")
        self.what, self.total, self.unit = what, total, unit
        self.expected_s = expected_s
        self.stream = stream if stream is not None else sys.stderr
        terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        self.tty = terminal if redraw is None else redraw
        self.every_s = tty_every_s if self.tty else (EVERY_S if every_s is None else every_s)
        self.clock = clock
        self.start = clock()
        self.done = 0
        self.note = ""
        self._written_at: float | None = None
        self._written: tuple[int, str] | None = None
        """(done, note) of the last line written."""
        self._closed = False
        self._write(force=True)

    def line(self) -> str:
        """The progress line as it stands now."""
        elapsed = self.clock() - self.start
        share = f" ({100 * self.done // self.total}%)" if self.total else ""
        left = "?"
        if self.done >= self.total:
            left = "0:00:00"
        elif (seconds := self.left_s(elapsed)) is not None:
            left = "~" + clock_text(seconds)
        note = f", {self.note}" if self.note else ""
        return (
            f"{self.what}: {self.done}/{self.total} {self.unit}{share}, elapsed {clock_text(elapsed)}, "
            f"left {left}{note}"
        )

    def left_s(self, elapsed: float) -> float | None:
        """Seconds left (module docstring); None while unknown."""
        per_item = elapsed / self.done if self.done else None
        if self.expected_s is None:
            return None if per_item is None else per_item * (self.total - self.done)
        rest = [per_item if seconds is None else seconds for seconds in self.expected_s[self.done :]]
        return None if None in rest else sum(rest)  # type: ignore[arg-type]

    def advance(self, n: int = 1, note: str | None = None) -> None:
        """``n`` more done; ``note``: what is running now (e.g. the variant and batch)."""
        self.done = min(self.done + n, self.total)
        if note is not None:
            self.note = note
        self._write(force=False)

    def close(self) -> None:
        """The final line (and, on a terminal, the newline that ends the redrawn one)."""
        if self._closed:
            return
        self._closed = True
        if self.tty or (self.done, self.note) != self._written:
            self._write(force=True)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, force: bool) -> None:
        now = self.clock()
        if not force and self._written_at is not None and now - self._written_at < self.every_s:
            return
        self._written_at, self._written = now, (self.done, self.note)
        if self.tty:
            self.stream.write("\r\x1b[K" + self.line())
        else:
            self.stream.write(f"progress: {self.line()}\n")
        self.stream.flush()
