"""Submit the stages as SLURM jobs with plain ``sbatch --parsable``, each ``afterok`` of what it needs.

Measured against submitit (``pip download submitit`` works: submitit-1.5.4): submitit runs a pickled Python
function in its own job script, handles preemption with its own signal and ``checkpoint()`` method, and
reads job states with ``sacct``, which needs SLURM accounting (the test cluster, like many small ones, has
``AccountingStorageType=accounting_storage/none``). Here every stage is already a command with its own
resume contract: train.py and evaluate.py through ``scripts/slurm/{train,evaluate}.sbatch``
(``--signal=SIGUSR1@90 --requeue``: the stage saves its checkpoint, requeues itself and resumes), every
other stage through ``scripts/slurm/stage.sbatch``. SLURM itself orders them (``--dependency=afterok``), so
nothing here waits or polls: ``sbatch --parsable`` and its job id are all that is needed.

Each stage's job is followed by a record job (``afterok`` of it: it runs only once the stage's last run,
after any requeue, has completed) that hashes the outputs into the state folder; the stages that need it
depend on the record job. ``--kill-on-invalid-dep=yes``: when a stage fails, SLURM cancels what waits on it,
and the next ``graphctx reproduce`` resubmits from the first stage without a record.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from graphctx.cache import write_json_atomic
from graphctx.errors import ConfigError
from graphctx.paths import inside
from graphctx.reproduce.stages import STAGE_SCRIPT, Stage
from graphctx.reproduce.state import State

JOBS_FILE = "jobs.json"


def check_sbatch() -> None:
    """Refuse ``--slurm`` where SLURM's client is not installed."""
    if shutil.which("sbatch") is None or shutil.which("squeue") is None:
        raise ConfigError(
            "--slurm: sbatch/squeue are not on PATH; run on a SLURM login node, or leave out --slurm"
        )


def queued_jobs(state: State) -> list[str]:
    """The jobs of the last submission into ``state`` that SLURM still has queued or running."""
    path = state.folder / JOBS_FILE
    if not path.is_file():
        return []
    ours = set(json_ids(path))
    listed = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True)
    if listed.returncode != 0:
        raise ConfigError(f"squeue failed: {listed.stderr.strip()}")
    return sorted(ours & set(listed.stdout.split()))


def json_ids(path: Path) -> list[str]:
    """Every job id of a ``jobs.json`` (stage → job ids); one that is not is a :class:`ConfigError`."""
    try:
        ids = [job for jobs in json.loads(path.read_text()).values() for job in jobs]
        if not all(isinstance(job, str) for job in ids):
            raise TypeError("job ids are not strings")
    except (OSError, ValueError, AttributeError, TypeError) as error:
        raise ConfigError(
            f"{path}: not the job list graphctx reproduce writes ({type(error).__name__}: {error}); check "
            "squeue for its jobs, then delete it"
        ) from None
    return ids


def sbatch(args: Sequence[str], env: dict[str, str] | None = None) -> str:
    """Submit; the job id ``sbatch --parsable`` prints (``id`` or ``id;cluster``)."""
    done = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise ConfigError(f"sbatch {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip().split(";")[0]


def stage_args(stage: Stage, after: Sequence[str], log: Path) -> list[str]:
    """sbatch options and script + arguments of a stage's job."""
    r = stage.resources
    options = [
        f"--job-name=graphctx-{stage.name.replace('/', '-')}",
        f"--nodes={r.nodes}",
        f"--ntasks-per-node={r.tasks}",
        f"--cpus-per-task={r.cpus}",
        f"--gpus-per-node={r.gpus}",
        f"--time={r.time}",
        "--requeue",
        "--signal=SIGUSR1@90",
        "--open-mode=append",
        "--kill-on-invalid-dep=yes",
        f"--output={log}",
        f"--error={log}",
        *([f"--mem={r.mem}"] if r.mem is not None else []),
        *([f"--dependency=afterok:{':'.join(after)}"] if after else []),
    ]
    return [*options, stage.script, *stage.script_args]


def submit(stages: Sequence[Stage], state: State, done: dict[str, str], out: TextIO) -> dict[str, list[str]]:
    """Submit every stage not in ``done`` (each after its needs' record jobs) and its record job; print one
    line per stage; the job ids per stage (stage job, record job), also written to ``jobs.json``."""
    for stage in stages:  # before anything is submitted
        if stage.name not in done:
            state.check_resumable(stage)
    logs = state.folder / "logs"
    record_job: dict[str, str] = {}
    jobs: dict[str, list[str]] = {}
    for stage in stages:
        if stage.name in done:
            print(f"skip {stage.name}: up to date ({done[stage.name]})", file=out, flush=True)
            continue
        state.plan(stage)
        log = inside(logs, f"{stage.name}.out", where=f"stage {stage.name}")
        log.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if stage.stdout is not None:
            Path(stage.stdout).parent.mkdir(parents=True, exist_ok=True)
            env["GRAPHCTX_STAGE_STDOUT"] = stage.stdout
        after = [record_job[need] for need in stage.needs if need in record_job]
        job = sbatch(stage_args(stage, after, log), env)
        recorder = sbatch(
            [
                f"--job-name=graphctx-record-{stage.name.replace('/', '-')}",
                "--ntasks=1",
                "--cpus-per-task=1",
                "--time=0:30:00",
                f"--dependency=afterok:{job}",
                "--kill-on-invalid-dep=yes",
                f"--output={inside(logs, f'{stage.name}.record.out', where=f'stage {stage.name}')}",
                STAGE_SCRIPT,
                "python",
                "-m",
                "graphctx.reproduce.record",
                str(state.folder),
                stage.name,
            ]
        )
        record_job[stage.name] = recorder
        jobs[stage.name] = [job, recorder]
        needs = f" after {','.join(after)}" if after else ""
        print(f"submit {stage.name}: job {job} (record job {recorder}){needs}", file=out, flush=True)
    write_json_atomic(state.folder / JOBS_FILE, jobs)
    return jobs
