"""The ``tables`` stage: every site's "Beside the paper" section of results.md, in one markdown file.

evaluate.py writes the section (:func:`graphctx.evaluation.matrix.beside_paper.paper_section`) at the end of
each site's results.md; this copies it out unchanged under the site's results file, or says that the site
has none (a site the paper has no figures for).

    python -m graphctx.reproduce.tables --out tables.md runs/a/eval/results.md runs/b/eval/results.md
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from graphctx.cache import atomic_path
from graphctx.errors import DataError, report

HEADING = "## Beside the paper"


def beside_section(results: Path) -> str | None:
    """The "Beside the paper" section of a results.md (its heading to the next ``## `` heading), or None."""
    if not results.is_file():
        raise DataError(f"{results}: no results.md (evaluate.py writes it)")
    lines = results.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(HEADING)), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start:end]).strip()


def gather(results: Sequence[Path]) -> str:
    """One markdown document: per results.md its section (headings one level down), or a line saying none."""
    parts = ["# Beside the paper, every site", ""]
    for path in results:
        section = beside_section(path)
        parts += [f"## {path}", ""]
        if section is None:
            parts += ['No "Beside the paper" section: the paper has no figures for this site.', ""]
        else:
            parts += ["#" + section, ""]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, type=Path, help="markdown file to write")
    parser.add_argument("results", nargs="+", type=Path, help="each site's results.md")
    args = parser.parse_args(argv)

    def write() -> int:
        text = gather(args.results)
        with atomic_path(args.out) as tmp:
            tmp.write_text(text)
        print(args.out)
        return 0

    return report(write, False)


if __name__ == "__main__":
    sys.exit(main())
