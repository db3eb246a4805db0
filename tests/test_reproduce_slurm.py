"""``graphctx reproduce --slurm`` on the real single-node SLURM cluster of ``scripts/slurm/cluster.sh``: the
whole tiny protocol (data → index ∥ train → evaluate → human, tables) as jobs, each ``afterok`` of its needs'
record jobs.

The first submission starts before the KG's Debian file is there (a download not finished): evaluate's job
fails on it and SLURM cancels every job waiting on it (``--kill-on-invalid-dep``), so human and tables never
run; while the jobs are queued a second invocation is refused. Once the file is there the same command
resubmits evaluate and what follows, skips data, index and train, and ends with the very outputs of a local
run of the same settings (:func:`reproduce_workspace.local_run`, shared with the local test); a third run
submits nothing.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml
from reproduce_workspace import (
    LocalRun,
    environment,
    outputs,
    reproduce,
    reproduce_config,
)
from slurm_cluster import SlurmCluster

from graphctx.knowledge.store import DEBIAN_JSONL, SOFTWARE_SQL

STAGES = ["cardano/data", "cardano/index", "cardano/train", "cardano/evaluate", "cardano/human", "tables"]
NEEDS = {
    "cardano/index": ["cardano/data"],
    "cardano/train": ["cardano/data"],
    "cardano/evaluate": ["cardano/index", "cardano/train"],
    "cardano/human": ["cardano/evaluate"],
    "tables": ["cardano/evaluate"],
}
LIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED")


def submitted(stdout: str) -> dict[str, tuple[str, str]]:
    """Stage → (its job, its record job), from reproduce's ``submit`` lines."""
    found = re.finditer(r"^submit (\S+): job (\d+) \(record job (\d+)\)", stdout, re.M)
    return {one.group(1): (one.group(2), one.group(3)) for one in found}


def verbs(stdout: str) -> dict[str, str]:
    """Stage → the first word of its line (``submit`` or ``skip``); the last line names the results."""
    *stages, last = stdout.splitlines()
    assert last.startswith("results (once the jobs finish): "), last
    return {line.split()[1].rstrip(":"): line.split()[0] for line in stages}


def final_states(cluster: SlurmCluster, jobs: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Stage → (JobState of its job, of its record job), once no job is queued or running any more."""
    for job, record in jobs.values():
        for one in (job, record):
            cluster.wait_for(one, lambda c, j: c.job_field(j, "JobState") not in LIVE, 300, "the job's end")
    return {
        stage: (cluster.job_field(job, "JobState"), cluster.job_field(record, "JobState"))
        for stage, (job, record) in jobs.items()
    }


def cancel_live(cluster: SlurmCluster, jobs: Iterable[str]) -> None:
    for job in jobs:
        if cluster.job_field(job, "JobState") in LIVE:
            cluster.run("scancel", job)


@pytest.mark.slow
def test_the_protocol_runs_as_dependent_jobs_and_a_failed_one_is_resubmitted_with_what_follows(
    slurm_cluster: SlurmCluster,
    reproduce_cache: Path,
    cardano_dir: Path,
    tiny_bert: Path,
    local_run: LocalRun,
    tmp_path: Path,
) -> None:
    shared_kg = cardano_dir.parents[1] / "kg"
    kg = tmp_path / "kg"
    kg.mkdir()
    (kg / SOFTWARE_SQL).symlink_to(shared_kg / SOFTWARE_SQL)  # the Debian packages file is not there yet
    config = reproduce_config(tmp_path, cardano_dir, tiny_bert, reproduce_cache, kg_dir=kg)
    state, logs = tmp_path / "state", tmp_path / "state" / "logs"
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = environment(SLURM_CONF=slurm_cluster.env["SLURM_CONF"], PATH=path)
    cluster = SlurmCluster(slurm_cluster.folder, env)
    args = ("--config", str(config), "--state", str(state), "--slurm", "--human-questions", "2")
    every_job: list[str] = []
    try:
        first = reproduce(*args, env=env)
        assert first.returncode == 0, first.stderr[-3000:]
        jobs = submitted(first.stdout)
        every_job += [one for pair in jobs.values() for one in pair]
        assert list(jobs) == STAGES, first.stdout
        for stage, needs in NEEDS.items():
            dependency = cluster.job_field(jobs[stage][0], "Dependency")
            assert re.findall(r"afterok:(\d+)", dependency) == [jobs[n][1] for n in needs], (
                stage,
                dependency,
            )
        assert cluster.job_field(jobs["cardano/train"][0], "Command").endswith("train.sbatch")
        assert cluster.job_field(jobs["cardano/evaluate"][0], "Command").endswith("evaluate.sbatch")

        second = reproduce(*args, env=env)
        assert second.returncode == 1
        error = second.stderr.strip().splitlines()
        assert len(error) == 1 and "still queued or running" in error[0], second.stderr

        # evaluate fails; what waits on it is cancelled, never run
        done, failed, cancelled = ("COMPLETED",) * 2, ("FAILED", "CANCELLED"), ("CANCELLED",) * 2
        assert final_states(cluster, jobs) == {
            **dict.fromkeys(STAGES[:3], done),
            "cardano/evaluate": failed,
            "cardano/human": cancelled,
            "tables": cancelled,
        }
        assert (
            f"error: knowledge.kg_dir: {kg} lacks {DEBIAN_JSONL}"
            in (logs / "cardano/evaluate.out").read_text()
        )
        assert sorted(p.name for p in (state / "records").rglob("*.json")) == [
            "data.json",
            "index.json",
            "train.json",
        ]
        assert not (logs / "cardano/human.out").exists() and not (logs / "tables.out").exists()

        # The file is there now: the same command resubmits evaluate and what follows, nothing before it
        (kg / DEBIAN_JSONL).symlink_to(shared_kg / DEBIAN_JSONL)
        fixed = reproduce(*args, env=env)
        assert fixed.returncode == 0, fixed.stderr[-3000:]
        assert verbs(fixed.stdout) == {
            **dict.fromkeys(STAGES[:3], "skip"),
            **dict.fromkeys(STAGES[3:], "submit"),
        }
        jobs = submitted(fixed.stdout)
        every_job += [one for pair in jobs.values() for one in pair]
        assert cluster.job_field(jobs["cardano/evaluate"][0], "Dependency") == "(null)"  # its needs are done
        for stage in ("cardano/human", "tables"):
            dependency = cluster.job_field(jobs[stage][0], "Dependency")
            assert re.findall(r"afterok:(\d+)", dependency) == [jobs["cardano/evaluate"][1]], dependency
        assert final_states(cluster, jobs) == dict.fromkeys(STAGES[3:], done)
    finally:
        cancel_live(cluster, every_job)

    for stage in STAGES:
        assert (state / "records" / f"{stage}.json").is_file(), stage
    root = tmp_path / "run"
    assert (root / "adapter" / "adapter_model.safetensors").is_file()
    assert "graphctx train: job" in (logs / "cardano" / "train.out").read_text()  # train.sbatch ran it
    assert (logs / "cardano" / "evaluate.out").read_text().count("graphctx evaluate: job") == 2
    # results, answers, data and index summaries, human export and tables: as the local run made them
    assert outputs(tmp_path) == local_run.outputs

    again = reproduce(*args, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert verbs(again.stdout) == dict.fromkeys(STAGES, "skip"), again.stdout

    # Other training settings, and an HPC checkpoint of the earlier run in the root: the train job would
    # resume from it, so nothing is submitted.
    (root / "hpc_ckpt_1.ckpt").write_bytes(b"")
    settings = yaml.safe_load(config.read_text())
    settings["trainer"]["max_steps"] = 2
    config.write_text(yaml.safe_dump(settings))
    submissions = (state / "jobs.json").read_text()
    stale = reproduce(*args, env=env)
    assert stale.returncode == 1 and stale.stdout == "", stale.stdout
    error = stale.stderr.strip().splitlines()
    assert len(error) == 1 and "hpc_ckpt_1.ckpt: an HPC checkpoint" in error[0], stale.stderr
    assert (state / "jobs.json").read_text() == submissions
