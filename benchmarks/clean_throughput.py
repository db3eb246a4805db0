"""Throughput of the whole dump -> dataset pipeline with HTML cleaning in 1 vs N worker processes.

Generates one dump of ``--mb`` megabytes (the real cardano posts repeated under fresh ids, as in
``parse_memory.py``), then builds the dataset from it twice, each in a fresh interpreter with its own
cache: ``workers=1`` (cleaning in the main process: the competitor) and ``workers=N`` (default: one per
core). Reports MB of Posts.xml per second for each, the speed-up, the peak memory of the whole process tree,
and whether both builds wrote byte-identical files. Prints one JSON object as its last line.

    python benchmarks/clean_throughput.py --mb 50 [--workers N] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from parse_memory import generate_dump, measure

OUTPUT_FILES = ("summary.json", "train.arrow", "validation.arrow", "test.arrow")


def same_output(first_cache: Path, second_cache: Path) -> bool:
    """Whether two caches hold one dataset folder each, of the same name and the same bytes."""
    (first,) = (first_cache / "datasets").iterdir()
    (second,) = (second_cache / "datasets").iterdir()
    return first.name == second.name and all(
        (first / name).read_bytes() == (second / name).read_bytes() for name in OUTPUT_FILES
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=50, help="size of the generated Posts.xml")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)), help="pooled run")
    parser.add_argument(
        "--device", choices=["cpu", "cuda"], default="cpu", help="unused: cleaning is CPU work"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        rows = generate_dump(tmp_path / "dump", args.mb)
        dump_mb = (tmp_path / "dump" / "Posts.xml").stat().st_size / 1e6
        print(f"generated {rows:,} rows ({dump_mb:.0f} MB)", file=sys.stderr)
        load_before = os.getloadavg()[0]  # other work on the machine takes cores from the pool
        runs = {}
        for workers in (1, args.workers):
            runs[workers] = measure("graphctx", tmp_path / "dump", tmp_path / f"cache{workers}", str(workers))
            print(f"workers={workers}: {runs[workers]}", file=sys.stderr)
        identical = same_output(tmp_path / "cache1", tmp_path / f"cache{args.workers}")
    serial, pooled = runs[1], runs[args.workers]
    print(
        json.dumps(
            {
                "dump_mb": round(dump_mb, 1),
                "rows": rows,
                "cores": len(os.sched_getaffinity(0)),
                "load_average_1min_before": round(load_before, 2),
                "workers": args.workers,
                "mb_per_s": round(dump_mb / pooled["seconds"], 2),
                "mb_per_s_workers_1": round(dump_mb / serial["seconds"], 2),
                "speedup": round(serial["seconds"] / pooled["seconds"], 2),
                "seconds": round(pooled["seconds"], 1),
                "seconds_workers_1": round(serial["seconds"], 1),
                "tree_peak_pss_mb": round(pooled["tree_peak_pss_mb"], 1),
                "tree_peak_pss_mb_workers_1": round(serial["tree_peak_pss_mb"], 1),
                "kept": pooled["kept"],
                "same_output": identical,
            }
        )
    )


if __name__ == "__main__":
    main()
