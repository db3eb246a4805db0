"""Run the stages here, in order, each as a subprocess: the very command a user would type (and a SLURM job
runs), with this interpreter.

Subprocesses rather than in-process calls: each stage then is exactly its command (its own argument
parsing, ``error:`` line, exit status, and lock on its output folder), the models one stage loads are freed
when it ends instead of piling up in one process, and a local run and a SLURM run execute the same thing.
The cost is one interpreter start per stage (a few seconds). A stage's stdout output is written atomically;
its stderr passes through, between reproduce's own ``progress:`` lines (:func:`stage_progress`). A stage
that fails stops the run with one line naming it; its record is not written, so the next
``graphctx reproduce`` starts again from it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import IO, TextIO

from graphctx.cache import atomic_path
from graphctx.errors import GraphctxError
from graphctx.progress import Progress
from graphctx.reproduce.stages import Stage
from graphctx.reproduce.state import State


class StageFailed(GraphctxError):
    """A stage's command exited with a non-zero status."""


class Stopped(GraphctxError):
    """reproduce was stopped (SIGTERM, SIGINT / Ctrl-C) while a stage ran."""


STOP_GRACE_S = 10.0
"""Seconds a stopped stage's processes get to end after SIGTERM before SIGKILL."""


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def stops_as_errors() -> Iterator[None]:
    """SIGTERM (SLURM's, ``kill``'s) raises, as SIGINT does, so that every ``finally`` runs (the running
    stage's process group is ended, temporary files removed, the lock released) instead of the process
    dying where it stands; the previous handler is restored afterwards."""
    previous = signal.signal(signal.SIGTERM, _raise_stopped)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_stage(command: list[str], env: dict[str, str], stdout: IO[str] | None) -> int:
    """Run ``command`` in its own process group and return its exit status. Stopped while it runs, the
    whole group (the stage and any processes it started) gets SIGTERM, then SIGKILL after
    :data:`STOP_GRACE_S`, before the stop goes on."""
    child = subprocess.Popen(command, env=env, stdout=stdout, start_new_session=True)
    try:
        return child.wait()
    except BaseException:
        _end_group(child)
        raise


def _end_group(child: subprocess.Popen[bytes]) -> None:
    for sent in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, sent)
        try:
            child.wait(timeout=STOP_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def argv(stage: Stage) -> list[str]:
    """The stage's command with ``python`` as this interpreter."""
    command = list(stage.command)
    return [sys.executable, *command[1:]] if command[0] == "python" else command


def run_local(stages: Sequence[Stage], state: State, done: dict[str, str], out: TextIO) -> None:
    """Run every stage not in ``done`` in order and record it; ``done`` stages are reported as skipped,
    first. Stopped (SIGTERM, SIGINT): one :class:`Stopped` line naming the stage, whose processes are
    ended and partial output removed; nothing of it is recorded."""
    try:
        with stops_as_errors():
            _run_stages(stages, state, done, out)
    except KeyboardInterrupt as stop:
        signal_name = str(stop) or "SIGINT"
        raise Stopped(
            f"stopped by {signal_name}: the running stage's processes were ended and its partial output "
            "removed, nothing of it recorded; rerun graphctx reproduce to continue from it"
        ) from None


def _run_stages(stages: Sequence[Stage], state: State, done: dict[str, str], out: TextIO) -> None:
    for stage in stages:
        if stage.name in done:
            print(f"skip {stage.name}: up to date ({done[stage.name]})", file=out, flush=True)
    todo = [stage for stage in stages if stage.name not in done]
    if not todo:
        return
    with stage_progress(todo, state) as progress:
        for number, stage in enumerate(todo, start=1):
            print(f"run {stage.name}: {' '.join(stage.command)}", file=out, flush=True)
            progress.advance(0, f"running {stage.name} (stage {number} of {len(todo)})")
            seconds = _run_one(stage, state)
            record = state.record(stage.name, seconds)
            print(f"done {stage.name}: {record} ({seconds:.1f} s)", file=out, flush=True)
            progress.advance(1, f"{stage.name} done")


def _run_one(stage: Stage, state: State) -> float:
    """Run ``stage`` (planned first); the seconds it took. :class:`StageFailed` when its command fails."""
    state.plan(stage)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    if stage.stdout is None:
        code = run_stage(argv(stage), env, sys.stderr)
    else:
        with atomic_path(stage.stdout) as tmp, open(tmp, "w") as handle:
            code = run_stage(argv(stage), env, handle)
            check_status(stage, code)  # before the output is renamed into place
    check_status(stage, code)
    return time.monotonic() - started


def stage_progress(todo: Sequence[Stage], state: State) -> Progress:
    """The run's progress on stderr: a plain line as each stage starts and ends (which of how many,
    elapsed, and time left from the seconds each stage took when last recorded here, a stage never
    recorded counted at the rate so far). Plain lines on a terminal too: the stages write between them."""
    expected = [state.recorded_seconds(stage.name) for stage in todo]
    return Progress("reproduce", len(todo), "stages", every_s=0, expected_s=expected, redraw=False)


def check_status(stage: Stage, code: int) -> None:
    """:class:`StageFailed` naming the stage and its command when ``code`` is not 0."""
    if code != 0:
        raise StageFailed(f"stage {stage.name} failed (exit status {code}): {' '.join(stage.command)}")
