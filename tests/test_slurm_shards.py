"""The pool embedding as a SLURM array on the real single-node cluster (``slurm_cluster``): each task embeds
its shard of the tiny config's pool, then one merge builds the index without embedding anything again."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

from slurm_cluster import REPO_ROOT, SlurmCluster
from tiny_config import recent_pool_config

from graphctx.cli import subcommand_parser
from graphctx.command_line import parse
from graphctx.commands import index as index_command


def json_line(log: str) -> dict:
    """The last JSON object line of a task's output (stdout and stderr together)."""
    return json.loads([line for line in log.splitlines() if line.startswith("{")][-1])


def test_an_array_job_embeds_the_shards_and_the_merge_only_reads_them(
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
    capsys,
    smollm2_folder: Path,
) -> None:
    cache, config = tmp_path / "cache", recent_pool_config(tmp_path, smollm2_folder)
    env = {
        **slurm_cluster.env,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO_ROOT),
    }
    cluster = SlurmCluster(slurm_cluster.folder, env)
    command = (
        f"{sys.executable} -m graphctx.cli index --config {config} --cache_dir {cache} --shards 2 --worker"
    )
    cluster.run(
        "sbatch",
        "--wait",
        "--array=0-1",
        "--ntasks=1",
        "--cpus-per-task=1",
        "--time=20",
        f"--output={tmp_path}/task-%a.out",
        f"--wrap={command}",
    )
    reports = [json_line((tmp_path / f"task-{task}.out").read_text()) for task in (0, 1)]
    assert [report["embedded"] for report in reports] == [[0], [1]]
    out = io.StringIO()
    argv = ["--config", str(config), "--cache_dir", str(cache), "--shards", "2", "--json"]
    args = parse(subcommand_parser("index"), argv)
    assert index_command.execute(args, out) == 0
    assert json.loads(capsys.readouterr().err.splitlines()[0])["embedded"] == []
    assert json.loads(out.getvalue())["pool"] > 0
