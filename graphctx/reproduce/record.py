"""The record job of a SLURM stage: ``python -m graphctx.reproduce.record STATE STAGE``.

Submitted ``afterok`` of the stage's job, so it runs once the stage's last run (after any requeue) has
completed; it hashes the stage's outputs into its record (:meth:`graphctx.reproduce.state.State.record`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from graphctx.errors import report
from graphctx.reproduce.state import State


def main(argv: Sequence[str] | None = None) -> int:
    folder, name = sys.argv[1:] if argv is None else argv

    def record() -> int:
        print(f"record {name}: {State(Path(folder)).record(name)}")
        return 0

    return report(record, False)


if __name__ == "__main__":
    sys.exit(main())
