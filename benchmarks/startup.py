"""Start-up time of the config-reading commands, this code against the commit it started from.

Times, as fresh processes, ``graphctx plan --config configs/llama2-7b-askubuntu.yaml --json`` and
``graphctx index --help`` (and, with ``--train``, ``python train.py --help``) on this working tree and on a
``git archive`` of the starting commit (default 204f5eb, where parsing a config imported Lightning, torch
and transformers) unpacked into a temporary folder and run with ``PYTHONPATH`` pointing there. Runs
alternate between the two trees; each figure is the median of ``--runs`` wall times, with the CPU seconds
(user + system) of the same runs, which a loaded machine inflates less. ``python -c pass`` is the floor.
Prints one JSON line.

    python benchmarks/startup.py [--runs 5] [--base 204f5eb] [--train]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "WANDB_MODE": "offline",
}
CONFIG = "configs/llama2-7b-askubuntu.yaml"
COMMANDS: dict[str, list[str]] = {
    "plan": ["-m", "graphctx.cli", "plan", "--config", CONFIG, "--json"],
    "index_help": ["-m", "graphctx.cli", "index", "--help"],
}


def timed(arguments: list[str], tree: Path) -> tuple[float, float]:
    """``(wall seconds, CPU seconds)`` of ``python <arguments>`` run in ``tree`` (its code on the path)."""
    env = {**os.environ, **OFFLINE, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, *arguments], cwd=tree, env=env, capture_output=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def medians(samples: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "wall_s": round(statistics.median(s[0] for s in samples), 3),
        "cpu_s": round(statistics.median(s[1] for s in samples), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="runs per command and tree (the median is kept)")
    parser.add_argument("--base", default="204f5eb", help="the commit to compare against")
    parser.add_argument("--train", action="store_true", help="also time python train.py --help")
    args = parser.parse_args()
    commands = dict(COMMANDS)
    if args.train:
        commands["train_help"] = ["train.py", "--help"]
    with tempfile.TemporaryDirectory(prefix="startup-base-") as folder:
        base = Path(folder) / "graphctx"
        base.mkdir()
        archive = subprocess.run(["git", "archive", args.base], cwd=REPO, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
        (base.parent / "shared").symlink_to(REPO.parent / "shared")  # the configs' ../shared/data paths
        trees = {"current": REPO, "base": base}
        samples: dict[str, dict[str, list]] = {tree: {name: [] for name in commands} for tree in trees}
        floor = []
        for _ in range(args.runs):
            floor.append(timed(["-c", "pass"], REPO))
            for name, arguments in commands.items():
                for tree, path in trees.items():
                    samples[tree][name].append(timed(arguments, path))
    result = {tree: {name: medians(runs) for name, runs in samples[tree].items()} for tree in samples}
    speedup = {
        name: round(result["base"][name]["wall_s"] / result["current"][name]["wall_s"], 2)
        for name in commands
    }
    print(
        json.dumps(
            {
                "benchmark": "startup",
                "runs": args.runs,
                "base_commit": args.base,
                "cpus": os.cpu_count(),
                "load_average_1min": round(os.getloadavg()[0], 2),
                "python_floor": medians(floor),
                **result,
                "speedup_wall": speedup,
            }
        )
    )


if __name__ == "__main__":
    main()
