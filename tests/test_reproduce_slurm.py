"""``graphctx reproduce --slurm`` on the real single-node SLURM cluster of ``scripts/slurm/cluster.sh``.

The smallest real graph: data → train (train through scripts/slurm/train.sbatch), each stage a job
``afterok`` of its needs' record jobs. While the jobs are queued a second invocation is refused;
once they have completed a rerun submits nothing.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import yaml
from reproduce_workspace import environment, reproduce, reproduce_cache, reproduce_config  # noqa: F401
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 -- fixture


@pytest.mark.slow
def test_stages_run_as_dependent_jobs_and_a_rerun_submits_nothing(
    slurm_cluster: SlurmCluster,  # noqa: F811 -- fixture
    reproduce_cache: Path,  # noqa: F811 -- fixture
    cardano_dir: Path,
    tiny_bert: Path,
    tmp_path: Path,
) -> None:
    config = reproduce_config(tmp_path, cardano_dir, tiny_bert, reproduce_cache)
    state = tmp_path / "state"
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = environment(SLURM_CONF=slurm_cluster.env["SLURM_CONF"], PATH=path)
    cluster = SlurmCluster(slurm_cluster.folder, env)
    args = ("--config", str(config), "--state", str(state), "--slurm", "--stages", "train")

    first = reproduce(*args, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    submitted = {
        found.group(1): (found.group(2), found.group(3))
        for found in re.finditer(r"^submit (\S+): job (\d+) \(record job (\d+)\)", first.stdout, re.M)
    }
    assert list(submitted) == ["cardano/data", "cardano/train"], first.stdout
    data_record = submitted["cardano/data"][1]
    try:
        dependency = cluster.job_field(submitted["cardano/train"][0], "Dependency")
        assert dependency.startswith(f"afterok:{data_record}"), dependency
        assert cluster.job_field(submitted["cardano/train"][0], "Command").endswith("train.sbatch")

        second = reproduce(*args, env=env)
        assert second.returncode == 1
        error = second.stderr.strip().splitlines()
        assert len(error) == 1 and "still queued or running" in error[0], second.stderr

        for _, record in submitted.values():
            cluster.wait_for(record, lambda c, j: c.job_field(j, "JobState") == "COMPLETED", 600, "a record")
    finally:
        for job, record in submitted.values():
            for one in (job, record):
                if cluster.job_field(one, "JobState") in ("PENDING", "RUNNING"):
                    cluster.run("scancel", one)
    for stage in submitted:
        assert (state / "records" / f"{stage}.json").is_file(), stage
    assert (tmp_path / "run" / "adapter" / "adapter_model.safetensors").is_file()
    log = (state / "logs" / "cardano" / "train.out").read_text()
    assert "graphctx train: job" in log  # train.sbatch ran it

    again = reproduce(*args, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [line.split()[0] for line in again.stdout.splitlines()] == ["skip"] * 2, again.stdout

    # Other training settings, and an HPC checkpoint of the earlier run in the root: the train job would
    # resume from it, so nothing is submitted.
    (tmp_path / "run" / "hpc_ckpt_1.ckpt").write_bytes(b"")
    settings = yaml.safe_load(config.read_text())
    settings["trainer"]["max_steps"] = 2
    config.write_text(yaml.safe_dump(settings))
    jobs = (state / "jobs.json").read_text()
    stale = reproduce(*args, env=env)
    assert stale.returncode == 1 and stale.stdout == "", stale.stdout
    error = stale.stderr.strip().splitlines()
    assert len(error) == 1 and "hpc_ckpt_1.ckpt: an HPC checkpoint" in error[0], stale.stderr
    assert (state / "jobs.json").read_text() == jobs
