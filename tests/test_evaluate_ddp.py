"""evaluate.py on several processes (real DDP: gloo on the CPU, each rank its own process started the way
torchrun or srun start them) writes exactly the files of a one-process run, and a run that loses a rank to
SIGKILL resumes on another number of processes to the same files.

The slice is small (5 cardano test questions, batches of 2, an odd number of batches per variant) and
covers both models and every kind of context: ZeroShot (base model, no context) and GraphContextGen
(adapter, graph retrieval + KG sentences)."""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from evaluation_workspace import write_workspace
from lightning.fabric.plugins.environments.lightning import find_free_network_port
from slurm_cluster import SlurmCluster

from graphctx.errors import ConfigError
from graphctx.evaluation.jsonl import read_records
from graphctx.evaluation.matrix.runner import MatrixEvaluation
from graphctx.evaluation.matrix.shards import Unit, balance, shard_path, shards_of
from graphctx.metrics.registry import built_in_classes
from graphctx.pipeline.config_file import load_config
from graphctx.pipeline.contexts import ContextBuilder
from graphctx.pipeline.processes import Processes, launch_processes, share_of
from graphctx.prompts import get_variants
from tests.forked_ranks import run_forked_ranks

REPO_ROOT = Path(__file__).resolve().parents[1]
LIMIT = 5
VARIANTS = ["ZeroShot", "GraphContextGen"]
CONTEXT_VARIANTS = ["TextGen", "TextContextGen", "GraphGen", "GraphContextGen"]
CONTEXTS_LINE = re.compile(r"contexts ready: retrieved (\d+) and enhanced (\d+) queries here")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, cardano_dir, tiny_bert) -> Path:
    """A random LoRA adapter, a config on the tiny random Llama, and the one-process reference run."""
    root = tmp_path_factory.mktemp("evaluate-ddp")
    evaluation = {
        "variants": VARIANTS,
        "output_dir": str(root / "one"),
        "limit": LIMIT,
        "bootstrap_samples": 50,
    }
    trainer = {"accelerator": "cpu", "strategy": "ddp", "devices": 1}
    retrieval = {"query_batch_size": 2}  # 5 questions, 3 batches: each of 2 ranks ranks some
    config = write_workspace(
        root,
        cardano_dir,
        tiny_bert,
        "eval.yaml",
        evaluation,
        trainer=trainer,
        retrieval=retrieval,
        generation={"max_new_tokens": 3, "batch_size": 2, "max_prompt_tokens": 256},
    )
    MatrixEvaluation(load_config(config)).evaluate()
    return root


def start_ranks(config: Path, output: Path, world_size: int = 2) -> list[subprocess.Popen]:
    """``evaluate.py`` once per rank, each told its rank in the environment (as torchrun does); stderr to
    ``<output>.rank<r>.err`` (a pipe that nobody drains could block a rank, and so the other)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(find_free_network_port()),
        "NODE_RANK": "0",
        "OMP_NUM_THREADS": "1",
    }
    command = [sys.executable, "evaluate.py", "--config", str(config), "--evaluation.output_dir", str(output)]
    command += ["--trainer.devices", str(world_size)]
    processes = []
    for rank in range(world_size):
        with open(f"{output}.rank{rank}.err", "wb") as stderr:
            processes.append(
                subprocess.Popen(
                    command,
                    cwd=REPO_ROOT,
                    env={**env, "LOCAL_RANK": str(rank)},
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                )
            )
    return processes


def finish(processes: list[subprocess.Popen], output: Path, timeout_s: float = 600) -> list[str]:
    """Wait for every rank (killed after ``timeout_s``); their stderr."""
    for process in processes:
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return [Path(f"{output}.rank{rank}.err").read_text() for rank in range(len(processes))]


def output_files(folder: Path) -> list[Path]:
    return [
        *(folder / kind / f"{name}.jsonl" for name in VARIANTS for kind in ("predictions", "scores")),
        *(
            folder / "scores" / name / f"{metric}.jsonl"
            for name in VARIANTS
            for metric in (cls.name for cls in built_in_classes())
        ),
        folder / "results.csv",
        folder / "results.md",
    ]


def assert_same_outputs(folder: Path, reference: Path) -> None:
    """Byte for byte, rows in the same (plan) order, no shard left behind."""
    for path in output_files(reference):
        ours = folder / path.relative_to(reference)
        assert ours.read_bytes() == path.read_bytes(), f"{ours} differs from {path}"
    for name in VARIANTS:
        assert not shards_of(folder / "predictions" / f"{name}.jsonl", name)
    assert not list((folder / "scores").rglob("shards/*.jsonl"))


@pytest.mark.slow
def test_two_processes_write_the_files_of_one(workspace):
    reference = workspace / "one"
    for name in VARIANTS:
        assert [r["id"] for r in read_records(reference / "scores" / f"{name}.jsonl")] == [
            r["id"] for r in read_records(reference / "predictions" / f"{name}.jsonl")
        ]
        assert len(read_records(reference / "predictions" / f"{name}.jsonl")) == LIMIT
    ranks = start_ranks(workspace / "eval.yaml", workspace / "two")
    tails = finish(ranks, workspace / "two")
    assert [process.returncode for process in ranks] == [0, 0], [tail[-3000:] for tail in tails]
    # each rank answered and scored its own batches: rank 1 (not rank 0) logged some
    assert "rank 0/2] " in tails[0] and "rank 1/2] " in tails[1]
    assert "answered" in tails[1] and "scored" in tails[1], tails[1][-3000:]
    # the contexts were shared out: each rank retrieved and enhanced some of the questions, none all
    counts = [[int(n) for n in CONTEXTS_LINE.search(tail).groups()] for tail in tails]
    for retrieved_or_enhanced in zip(*counts, strict=True):
        assert sum(retrieved_or_enhanced) == LIMIT and min(retrieved_or_enhanced) > 0, counts
    assert_same_outputs(workspace / "two", reference)


def _contexts_rank(rank: int, port: int, run: MatrixEvaluation, queries: list[str], out: Path) -> None:
    """One of two gloo processes, started the way torchrun or srun start them: its contexts and counts."""
    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "NODE_RANK": "0"}
    os.environ["LOCAL_RANK"] = str(rank)
    processes = launch_processes({"accelerator": "cpu", "devices": 2, "strategy": "ddp"})
    builder = context_builder(run, processes)
    contexts = builder.for_variants(get_variants(CONTEXT_VARIANTS), queries)
    summary = builder.knowledge_summary()
    counts = {"retrieved": builder.queries_retrieved, "enhanced": builder.queries_enhanced}
    with open(out / f"rank{rank}.pkl", "wb") as handle:
        pickle.dump((contexts, counts, summary), handle)


def context_builder(run: MatrixEvaluation, processes: Processes | None = None) -> ContextBuilder:
    run.load_rows()
    pool = list(run.pool.values())
    config = run.config
    return ContextBuilder(
        pool, config.retrieval, config.knowledge, run.cache_dir, tokenizer=run.tokenizer, processes=processes
    )


@pytest.mark.slow
@pytest.mark.parametrize("count", [1, 3])
def test_two_processes_share_out_the_contexts_and_each_gets_those_of_one(workspace, tmp_path, count):
    """Dense and graph retrieval, with and without KG sentences, for fewer query batches than processes
    (rank 0 ranks them) and for more (batches of 2): every rank ends with the single process's contexts,
    hit scores bit for bit."""
    evaluation = MatrixEvaluation(load_config(workspace / "eval.yaml"))
    queries = [row["question"] for row in evaluation.load_rows()[:count]]
    expected = context_builder(evaluation).for_variants(get_variants(CONTEXT_VARIANTS), queries)
    port = find_free_network_port()
    rank_args = [(rank, port, evaluation, queries, tmp_path) for rank in (0, 1)]
    assert run_forked_ranks(_contexts_rank, rank_args, timeout_s=300) == [0, 0]
    results = [pickle.loads((tmp_path / f"rank{rank}.pkl").read_bytes()) for rank in (0, 1)]
    for contexts, _, _ in results:
        assert contexts == expected
    retrieved = [counts["retrieved"] for _, counts, _ in results]
    enhanced = [counts["enhanced"] for _, counts, _ in results]
    methods = 2  # dense and graph: a query is ranked once by each, and enhanced once for each
    assert sum(retrieved) == methods * count and sum(enhanced) == methods * count
    if count == 1:
        assert retrieved == [methods, 0]  # one batch for two processes: rank 0 ranks it
    else:
        assert min(retrieved) > 0 and min(enhanced) > 0
    assert results[0][2].startswith("; KG: ")  # the summary of every rank's requests


@pytest.mark.slow
def test_a_rank_killed_mid_run_resumes_on_one_process_to_the_same_files(workspace):
    output = workspace / "killed"
    ranks = start_ranks(workspace / "eval.yaml", output)
    deadline = time.monotonic() + 600
    try:
        while not any(p.stat().st_size for p in (output / "predictions" / "shards").glob("*.rank1.jsonl")):
            assert all(p.poll() is None for p in ranks), finish(ranks, output)
            assert time.monotonic() < deadline, "rank 1 wrote no prediction shard in 600 s"
            time.sleep(0.02)
        ranks[1].send_signal(signal.SIGKILL)
    finally:
        tails = finish(ranks, output, timeout_s=60)  # rank 0 fails in its next collective with rank 1 gone
    assert ranks[1].returncode == -signal.SIGKILL and ranks[0].returncode != 0, tails[0][-3000:]
    assert not (output / "results.csv").exists()
    # rows scored by every metric: those with AutoAIS, the last metric scored
    scored = sum(len(read_records(p)) for p in (output / "scores").rglob("autoais*.jsonl"))
    assert scored < LIMIT * len(VARIANTS)  # killed mid-run
    torn = next((output / "predictions" / "shards").glob("*.rank1.jsonl"))
    with open(torn, "ab") as handle:  # and a write torn by the kill
        handle.write(b'{"id": 4242, "variant": "ZeroShot", "gener')

    MatrixEvaluation(load_config(workspace / "eval.yaml"), output_dir=output).evaluate()
    assert_same_outputs(output, workspace / "one")


@pytest.mark.slow
def test_evaluate_sbatch_on_two_tasks_is_requeued_by_sigusr1_and_ends_with_the_files_of_one_process(
    workspace,
    slurm_cluster: SlurmCluster,
):
    """scripts/slurm/evaluate.sbatch on the real single-node cluster of scripts/slurm/cluster.sh, 2 tasks;
    SIGUSR1 mid-run (as ``--signal=USR1@90`` sends it): the tasks stop after their batch, the job is
    requeued, and the second run completes the files."""
    output, log = workspace / "slurm", workspace / "slurm.out"
    env = {
        **slurm_cluster.env,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "WANDB_MODE": "offline",
        "OMP_NUM_THREADS": "1",
    }
    cluster = SlurmCluster(slurm_cluster.folder, env)
    # the template asks for 4 GPUs and a day; this cluster has 2 CPUs: two CPU tasks, ten minutes
    job = cluster.run(
        "sbatch",
        "--parsable",
        "--gpus-per-node=0",
        "--ntasks-per-node=2",
        "--cpus-per-task=1",
        "--time=10",
        f"--output={log}",
        str(REPO_ROOT / "scripts" / "slurm" / "evaluate.sbatch"),
        "--config",
        str(workspace / "eval.yaml"),
        "--evaluation.output_dir",
        str(output),
    ).strip()
    shards = output / "predictions" / "shards"
    try:
        deadline = time.monotonic() + 600
        while not any(path.stat().st_size for path in shards.glob("*.jsonl")):
            state = cluster.job_field(job, "JobState")
            assert state in ("PENDING", "CONFIGURING", "RUNNING"), log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no prediction shard in 600 s"
            time.sleep(0.05)
        cluster.run("scancel", "--signal=USR1", job)
        # SLURM holds a requeued batch job for about two minutes (BeginTime): release it at once
        cluster.wait_for(job, lambda c, j: c.job_field(j, "Restarts") == "1", 120, "the requeue")
        cluster.wait_for(job, lambda c, j: c.job_field(j, "JobState") == "PENDING", 60, "the old run to end")
        cluster.release(job)
        cluster.wait_for(job, lambda c, j: c.job_field(j, "JobState") == "COMPLETED", 300, "completion")
    finally:
        if cluster.job_field(job, "JobState") not in ("COMPLETED", ""):
            cluster.run("scancel", job)
    text = log.read_text()
    assert "restart 0" in text and "restart 1" in text and "stop requested" in text, text[-3000:]
    assert_same_outputs(output, workspace / "one")


def test_a_shard_made_with_other_settings_is_refused_with_its_path(workspace):
    output = workspace / "foreign"
    evaluation = MatrixEvaluation(load_config(workspace / "eval.yaml"), output_dir=output)
    stamp = evaluation.guard.fingerprint(evaluation.variants[0])
    foreign = shard_path(output / "predictions" / "ZeroShot.jsonl", "ZeroShot", "0" * len(stamp), 3)
    foreign.parent.mkdir(parents=True)
    foreign.write_text('{"id": 1, "generated": "from another config"}\n')
    with pytest.raises(ConfigError, match=rf"^{foreign}: a shard of ZeroShot made with other settings"):
        evaluation.evaluate()
    assert foreign.is_file() and not (output / "predictions" / "ZeroShot.jsonl").exists()
    evaluation.merge(overwrite=True)  # --overwrite moves it aside, never deletes it
    assert not foreign.exists()
    (aside,) = (output / "stale").glob(f"*/predictions/shards/{foreign.name}")
    assert aside.read_text() == '{"id": 1, "generated": "from another config"}\n'


@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 7])
def test_balance_deals_every_unit_once_and_evens_the_load(world_size):
    costs = [90, 80, 80, 50, 40, 30, 20, 10, 10]
    units = [Unit("v", n, (n,), cost) for n, cost in enumerate(costs)]
    shares = balance(units, world_size)
    assert len(shares) == world_size
    assert sorted(u.number for share in shares for u in share) == list(range(len(units)))
    assert all([u.number for u in share] == sorted(u.number for u in share) for share in shares)
    loads = [sum(u.cost for u in share) for share in shares]
    # longest processing time first: no process ends more than one unit's cost after another
    assert max(loads) - min(loads) <= max(costs)
    assert shares == balance(units, world_size)
    if world_size == 2:
        assert loads == [210, 200]


@pytest.mark.parametrize("world_size", [1, 2, 3, 5])
@pytest.mark.parametrize(("count", "unit"), [(0, 2), (1, 2), (9, 2), (10, 3), (7, 1)])
def test_shares_cover_every_position_once_in_whole_runs(count, unit, world_size):
    """The ranks' shares (retrieval's whole query batches, enhancement's queries) cover every position once,
    in rank order; each starts on a run boundary; run counts differ by at most one, lower ranks first."""
    shares = [share_of(count, unit, rank, world_size) for rank in range(world_size)]
    assert [position for share in shares for position in share] == list(range(count))
    assert all(share.start % unit == 0 for share in shares if share)
    runs = [-(-len(share) // unit) for share in shares]
    assert max(runs) - min(runs) <= 1 and runs == sorted(runs, reverse=True)
    if (count, unit, world_size) == (9, 2, 2):
        assert shares == [range(0, 6), range(6, 9)]
    if (count, unit, world_size) == (1, 2, 2):
        assert shares == [range(0, 1), range(1, 1)]  # fewer batches than ranks: rank 0 ranks them
