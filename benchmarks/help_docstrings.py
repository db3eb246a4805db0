"""Cost of showing every settings field's docstring in ``--help`` (jsonargparse + docstring-parser).

Each run is a fresh interpreter that imports train.py (the imports are the same either way and are not
timed) and times ``python train.py --help`` in-process (building LightningCLI's parser and printing its
help), with the fields' attribute docstrings read (as train.py does for ``--help``) or not (the
competitor, as before). Runs alternate between the two. Prints the median seconds of each, the added
seconds, and whether only the help with docstrings holds a field's docstring; the last line is one JSON
object.

    python benchmarks/help_docstrings.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = """
import contextlib, io, json, sys, time
import train
if not {flag}:  # the competitor: help without the fields' attribute docstrings, as before
    train.field_docstrings = contextlib.nullcontext
out = io.StringIO()
start = time.perf_counter()
with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
    train.main(["--help"])
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "documented": "PageRank damping factor" in out.getvalue()}}))
"""


def probe(flag: bool) -> dict:
    """One fresh interpreter's timing of train.py --help with docstring parsing ``flag``."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(flag=flag)], cwd=REPO, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3, help="fresh interpreters per setting")
    args = parser.parse_args()
    runs: dict[bool, list[dict]] = {False: [], True: []}
    for _ in range(args.repeats):
        for flag in (False, True):
            runs[flag].append(probe(flag))
    median = {flag: statistics.median(run["seconds"] for run in runs[flag]) for flag in runs}
    print(
        json.dumps(
            {
                "benchmark": "help_docstrings",
                "repeats": args.repeats,
                "help_s_without_docstrings": round(median[False], 3),
                "help_s_with_docstrings": round(median[True], 3),
                "added_s": round(median[True] - median[False], 3),
                "docstrings_shown": all(run["documented"] for run in runs[True])
                and not any(run["documented"] for run in runs[False]),
            }
        )
    )


if __name__ == "__main__":
    main()
