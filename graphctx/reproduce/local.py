"""Run the stages here, in order, each as a subprocess: the very command a user would type (and a SLURM job
runs), with this interpreter.

Subprocesses rather than in-process calls: each stage then is exactly its command (its own argument
parsing, ``error:`` line, exit status, and lock on its output folder), the models one stage loads are freed
when it ends instead of piling up in one process, and a local run and a SLURM run execute the same thing.
The cost is one interpreter start per stage (a few seconds). A stage's stdout output is written atomically;
its stderr passes through. A stage that fails stops the run with one line naming it; its record is not
written, so the next ``graphctx reproduce`` starts again from it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from graphctx.cache import atomic_path
from graphctx.errors import GraphctxError
from graphctx.reproduce.stages import Stage
from graphctx.reproduce.state import State


class StageFailed(GraphctxError):
    """A stage's command exited with a non-zero status."""


def argv(stage: Stage) -> list[str]:
    """The stage's command with ``python`` as this interpreter."""
    command = list(stage.command)
    return [sys.executable, *command[1:]] if command[0] == "python" else command


def run_local(stages: Sequence[Stage], state: State, done: dict[str, str], out: TextIO) -> None:
    """Run every stage not in ``done`` in order and record it; ``done`` stages are reported as skipped."""
    for stage in stages:
        if stage.name in done:
            print(f"skip {stage.name}: up to date ({done[stage.name]})", file=out, flush=True)
            continue
        print(f"run {stage.name}: {' '.join(stage.command)}", file=out, flush=True)
        state.plan(stage)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        started = time.monotonic()
        if stage.stdout is None:
            code = subprocess.run(argv(stage), env=env, stdout=sys.stderr).returncode
        else:
            with atomic_path(stage.stdout) as tmp, open(tmp, "w") as handle:
                code = subprocess.run(argv(stage), env=env, stdout=handle).returncode
                check_status(stage, code)  # before the output is renamed into place
        check_status(stage, code)
        seconds = time.monotonic() - started
        print(f"done {stage.name}: {state.record(stage.name)} ({seconds:.1f} s)", file=out, flush=True)


def check_status(stage: Stage, code: int) -> None:
    """:class:`StageFailed` naming the stage and its command when ``code`` is not 0."""
    if code != 0:
        raise StageFailed(f"stage {stage.name} failed (exit status {code}): {' '.join(stage.command)}")
