"""The pool embedding in shards (``graphctx index --shards N [--worker]``): two worker processes (ranks),
a resumed run that embeds nothing twice, the merge into one index equal to a single pass's."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_config import recent_pool_config

from graphctx.cli import subcommand_parser
from graphctx.command_line import parse
from graphctx.commands import index as index_command
from graphctx.errors import ConfigError
from graphctx.retrieval.builders import build_embeddings
from graphctx.retrieval.scale.shards import embed_shards, merge_shards, shard_slices, worker_shards
from graphctx.retrieval.settings import RetrievalSettings

REPO = Path(__file__).resolve().parent.parent


def worker(config: Path, cache: Path, shards: int, env: dict[str, str]) -> subprocess.Popen:
    """``graphctx index --shards N --worker`` in its own process with the worker variables ``env``."""
    return subprocess.Popen(
        [
            *(
                sys.executable,
                "-m",
                "graphctx.cli",
                "index",
                "--config",
                str(config),
                "--cache_dir",
                str(cache),
            ),
            *("--shards", str(shards), "--worker"),
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen) -> dict:
    """The JSON line a worker printed (its stderr on failure)."""
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def index_report(config: Path, cache: Path, capsys, **options) -> tuple[dict, str]:
    """``graphctx index`` in this process: its JSON report and what it wrote to stderr."""
    out = io.StringIO()
    args = parse(subcommand_parser("index"), ["--config", str(config), "--cache_dir", str(cache), "--json"])
    for key, value in options.items():
        args[key] = value
    assert index_command.execute(args, out) == 0
    return json.loads(out.getvalue()), capsys.readouterr().err


@pytest.mark.slow
def test_two_ranks_embed_their_shards_and_the_merge_equals_one_pass(tmp_path, capsys, smollm2_folder):
    sharded, single = tmp_path / "sharded", tmp_path / "single"
    config = recent_pool_config(tmp_path, smollm2_folder)
    ranks = [worker(config, sharded, 4, {"RANK": str(rank), "WORLD_SIZE": "2"}) for rank in (0, 1)]
    reports = [finished(process) for process in ranks]
    assert [report["embedded"] for report in reports] == [[0, 2], [1, 3]]
    resumed = worker(config, sharded, 4, {"RANK": "1", "WORLD_SIZE": "2"})
    assert finished(resumed)["embedded"] == []
    merged, err = index_report(config, sharded, capsys, shards=4)
    assert json.loads(err.splitlines()[0]) == {"shards": 4, "embedded": [], "merged": merged["pool"]}
    whole, _ = index_report(config, single, capsys)
    assert {key: merged[key] for key in ("pool", "edges")} == {key: whole[key] for key in ("pool", "edges")}
    from graphctx.pipeline.config_file import load_config
    from graphctx.pipeline.pool import pool_index

    run_config = load_config(str(config))
    train = run_config.load_dataset()["train"]
    one, two = (pool_index(train, run_config.retrieval, str(cache)) for cache in (single, sharded))
    assert torch.allclose(one.embeddings, two.embeddings, atol=1e-6)
    assert torch.equal(one.graph.edge_index, two.graph.edge_index)


def test_a_merge_embeds_only_the_shards_no_worker_did(tmp_path):
    texts = ["How do I stake ADA?", "What is a UTXO?", "How long is an epoch?", "Why is my tx pending?"]
    settings = RetrievalSettings(device="cpu")
    assert embed_shards(texts, settings, str(tmp_path), 3, worker_shards(3, ARRAY_TASK_4_OF_3_TO_5)) == [1]
    merged, embedded = merge_shards(texts, settings, str(tmp_path), 3)
    assert embedded == [0, 2]
    assert torch.allclose(merged, build_embeddings(texts, settings, cache_dir=str(tmp_path)), atol=0)
    assert torch.allclose(
        merged, build_embeddings(texts, settings, cache_dir=str(tmp_path / "other")), atol=1e-6
    )


ARRAY_TASK_4_OF_3_TO_5 = {
    "SLURM_ARRAY_TASK_ID": "4",
    "SLURM_ARRAY_TASK_MIN": "3",
    "SLURM_ARRAY_TASK_COUNT": "3",
}


def test_worker_numbers_and_slices():
    assert worker_shards(4, {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2", "RANK": "0"}) == [
        1,
        3,
    ]
    assert worker_shards(3, {}) == [0, 1, 2]
    with pytest.raises(ConfigError, match="WORLD_SIZE=2: the worker number must be below the count"):
        worker_shards(4, {"RANK": "2", "WORLD_SIZE": "2"})
    assert [s.stop - s.start for s in shard_slices(10, 4)] == [2, 3, 2, 3]
