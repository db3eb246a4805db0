"""evaluate.py on 1 vs 2 processes (CPU, gloo DDP): wall time, rows/s and the speed-up, per stage too.

Both runs evaluate the same slice of a config (default: ``configs/tiny.yaml``, ``--limit`` questions ×
``--variants``, batches of ``--batch-size``, answers of at most ``--max-new-tokens``), each into a fresh
output folder, as ``python evaluate.py`` subprocesses: the competitor is the same command with
``--trainer.devices 2 --trainer.strategy ddp --trainer.accelerator cpu``, started by Lightning's launcher
(which gives each process ``cpu_count / 2`` threads). A third run, one process held to one thread
(``OMP_NUM_THREADS=1``, what each of the two processes gets), shows how the processes themselves scale:
its stage time over the two processes' is the speed-up the second process brings, 2× at best, while the
first comparison also counts what a second thread already gives one process. The retrieval index,
embeddings and knowledge-graph enhancement are cached by a warm-up before any run is timed, so every run
reads them from the cache.

Wall time is the whole command (start-up, model loading, contexts, answers, scores, table); rows/s is
(questions × variants) / wall time. The runner writes each rank's seconds per stage to
``<output>/timings.json``; a run's stage time is its slowest rank's. The two runs' predictions, scores
and results tables are checked equal byte for byte.

    python benchmarks/evaluate_scaling.py [--config configs/tiny.yaml --limit 8 --variants ZeroShot ...]

Prints progress to stderr and one JSON object as the last line of stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def warm_caches(config_path: str, variants: list[str], limit: int) -> None:
    """Retrieval and enhancement of the slice once, so that both timed runs read them from the caches."""
    from graphctx.evaluation.matrix.runner import MatrixEvaluation
    from graphctx.pipeline.config_file import load_config

    evaluation = MatrixEvaluation(load_config(config_path), variants, limit)
    rows, _ = evaluation.load_rows()
    evaluation.build_contexts(rows)


def stage_seconds(output: Path) -> dict[str, float]:
    """Per stage, the slowest rank's seconds, from the run's ``timings.json``."""
    ranks = json.loads((output / "timings.json").read_text())["stage_seconds"]
    return {stage: round(max(rank.get(stage, 0.0) for rank in ranks), 2) for stage in ranks[0]}


def answer_seconds_per_rank(output: Path) -> list[float]:
    """Each rank's seconds in the answers stage (how evenly the work was dealt)."""
    ranks = json.loads((output / "timings.json").read_text())["stage_seconds"]
    return [round(rank.get("answers", 0.0), 2) for rank in ranks]


def evaluate(
    args: argparse.Namespace, output: Path, processes: int, threads: int | None = None
) -> dict[str, object]:
    """One timed ``evaluate.py`` run on ``processes`` processes (each with ``threads`` threads if set)."""
    command = [sys.executable, "evaluate.py", "--config", args.config, "--evaluation.output_dir", str(output)]
    command += ["--evaluation.limit", str(args.limit), "--variants", *args.variants]
    command += [
        "--generation.batch_size",
        str(args.batch_size),
        "--generation.max_new_tokens",
        str(args.max_new_tokens),
        "--evaluation.wandb_project",
        "null",
    ]
    if processes > 1:
        command += ["--trainer.devices", str(processes), "--trainer.strategy", "ddp"]
        command += ["--trainer.accelerator", "cpu"]
    env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    print(
        f"evaluate_scaling: {processes} process(es), threads {threads or 'default'}: {' '.join(command[1:])}",
        file=sys.stderr,
    )
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"evaluate.py on {processes} process(es) failed:\n{done.stderr[-3000:]}")
    rows = args.limit * len(args.variants)
    return {
        "wall_s": round(wall, 2),
        "rows_per_s": round(rows / wall, 3),
        "stages_s": stage_seconds(output),
        "answers_s_per_rank": answer_seconds_per_rank(output),
    }


def speedup(one: dict, two: dict, stage: str) -> float | None:
    """Seconds of ``stage`` on one process / on two (slowest rank)."""
    first, second = one["stages_s"].get(stage), two["stages_s"].get(stage)
    return round(first / second, 3) if first and second else None


def same_outputs(one: Path, two: Path, variants: list[str]) -> bool:
    """Whether both runs wrote the same predictions, scores and tables, byte for byte."""
    names = [f"{kind}/{v}.jsonl" for v in variants for kind in ("predictions", "scores")]
    return all(
        (one / n).read_bytes() == (two / n).read_bytes() for n in [*names, "results.csv", "results.md"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default="configs/tiny.yaml")
    parser.add_argument("--limit", type=int, default=4, help="questions of the test split")
    parser.add_argument("--variants", nargs="+", default=["ZeroShot", "Base-GraphContextGen"])
    parser.add_argument("--batch-size", type=int, default=1, help="generation.batch_size")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="generation.max_new_tokens")
    args = parser.parse_args()

    print("evaluate_scaling: warming the retrieval and knowledge caches", file=sys.stderr)
    warm_caches(args.config, args.variants, args.limit)
    with tempfile.TemporaryDirectory(prefix="evaluate-scaling-") as folder:
        one = evaluate(args, Path(folder) / "one", 1)
        one_thread = evaluate(args, Path(folder) / "one-thread", 1, threads=1)
        two = evaluate(args, Path(folder) / "two", 2)
        identical = all(
            same_outputs(Path(folder) / name, Path(folder) / "two", args.variants)
            for name in ("one", "one-thread")
        )
    result = {
        "benchmark": "evaluate_scaling",
        "config": args.config,
        "rows": args.limit * len(args.variants),
        "variants": args.variants,
        "batch_size": args.batch_size,
        "max_new_tokens": args.max_new_tokens,
        "cpu_count": os.cpu_count(),
        "one_process": one,
        "one_process_one_thread": one_thread,
        "two_processes": two,
        "speedup_wall": round(one["wall_s"] / two["wall_s"], 3),
        **{f"speedup_{stage}": speedup(one, two, stage) for stage in ("contexts", "answers", "scores")},
        "speedup_answers_vs_one_thread": speedup(one_thread, two, "answers"),
        "identical_outputs": identical,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
