"""Progress of one long stage a person can read: what runs, done/total, elapsed and time left.

On a terminal (the stream is a tty) one line is redrawn in place (``\\r``) at most every ``tty_every_s``
seconds and finished with a newline; in a plain log (a pipe, a file, a SLURM ``.out``) a plain line is
written at most every ``every_s`` seconds, and always at the start and at the end::

    answers (adapter): 12/96 rows (12%), elapsed 0:00:41, left ~0:04:47, FineTuned batch 2

Time left is the rate so far extrapolated: left = elapsed · (total − done) / done (unknown before the
first step is done). ``clock`` is injectable so tests are deterministic.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
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
        every_s: float = EVERY_S,
        tty_every_s: float = TTY_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if total < 0:
            raise ValueError(f"progress of {what}: total must be >= 0, got {total}")
        self.what, self.total, self.unit = what, total, unit
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every_s = tty_every_s if self.tty else every_s
        self.clock = clock
        self.start = clock()
        self.done = 0
        self.note = ""
        self._written_at: float | None = None
        self._closed = False
        self._write(force=True)

    def line(self) -> str:
        """The progress line as it stands now."""
        elapsed = self.clock() - self.start
        share = f" ({100 * self.done // self.total}%)" if self.total else ""
        left = "?"
        if self.done >= self.total:
            left = "0:00:00"
        elif self.done:
            left = "~" + clock_text(elapsed * (self.total - self.done) / self.done)
        note = f", {self.note}" if self.note else ""
        return (
            f"{self.what}: {self.done}/{self.total} {self.unit}{share}, elapsed {clock_text(elapsed)}, "
            f"left {left}{note}"
        )

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
        self._written_at = now
        if self.tty:
            self.stream.write("\r\x1b[K" + self.line())
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()
