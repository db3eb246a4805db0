"""The documentation's figures about the tiny config, computed from its data, so that they cannot go stale
(they were the README's; the pages that hold them now are :data:`PAGES`).

    python scripts/readme_figures.py               # the figures and the pages' phrases, one JSON line
    python scripts/readme_figures.py --retrieval   # also the T sweep of `graphctx retrieval-eval` (minutes)
    python scripts/readme_figures.py --results docs/results/tiny-20.md   # the README's results tables

tests/test_docs.py checks on every CI run that the pages state them: the rows per split of the tiny
config's dataset (:func:`split_sizes`, :func:`split_phrases`; docs/configuration.md) and the T-sweep
sentence (which T makes the graph retriever equal dense retrieval, :func:`sweep_phrases`;
docs/commands/retrieval-eval.md; its test reads the pool's MiniLM embeddings from the cache
tests/test_retrieval_eval.py fills). Training time is not a figure of the data: the docs state none
(Lightning's progress bar shows it for the machine at hand).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from graphctx.pipeline.run_config import RunConfig

TINY = "configs/tiny.yaml"
SWEEP = "0.5:0.7:0.05"
"""The thresholds of the sweep sentence."""
DOMINATED = 0.75
"""The fallback share from which the docs say the graph retriever has become dense retrieval."""
PAGES = {"split": "docs/configuration.md", "sweep": "docs/commands/retrieval-eval.md"}
"""The page that states each kind of figure (the configs table; "Choosing T")."""


def split_sizes(config: RunConfig) -> dict[str, int]:
    """Questions (with their accepted answer, after cleaning) per split of the config's dataset."""
    return {name: len(rows) for name, rows in config.load_dataset().items()}


def split_phrases(sizes: dict[str, int]) -> list[str]:
    """What the docs say about them (the configs table of docs/configuration.md)."""
    return [
        f"split April–Sept / Sept–Oct / Oct–Dec 2021: {sizes['train']} / {sizes['validation']} / "
        f"{sizes['test']} questions"
    ]


def interval(figure: dict[str, float]) -> str:
    """``0.53 [0.43, 0.62]``: a mean and its 95% interval as the docs write them."""
    return f"{figure['mean']:.2f} [{figure['low']:.2f}, {figure['high']:.2f}]"


def sweep_phrases(results: dict[str, Any]) -> list[str]:
    """The T-sweep sentence ("Choosing T") from ``graphctx retrieval-eval --json``'s document: the linked
    queries, graph nDCG@10 at the sweep's first T, the first T whose fallback share reaches
    :data:`DOMINATED` and the first T from which graph nDCG@10 is dense retrieval's (mean and interval)."""
    rows, dense = results["sweep"], results["methods"]["dense"]["ndcg@10"]
    dominated = next(row["threshold"] for row in rows if row["fallback_share"] >= DOMINATED)
    equal = next(row["threshold"] for row in rows if interval(row["ndcg@10"]) == interval(dense))
    first = rows[0]
    linked = round(first["linked_share"] * results["queries"])
    edges = "every query has an edge" if linked == results["queries"] else f"{linked} queries have an edge"
    return [
        f"only {results['queries']} test questions link to an older pool question: at T = "
        f"{first['threshold']:g} {edges} and nDCG@10 is {interval(first['ndcg@10'])}",
        f"from T = {dominated:g} three quarters of the hits are fallbacks, and from T = {equal:g} the graph "
        f"equals dense ({interval(dense)})",
    ]


def page_phrases(
    split: dict[str, int] | None = None, sweep: dict[str, Any] | None = None
) -> dict[str, list[str]]:
    """The phrases each page of :data:`PAGES` must hold, for the figures given."""
    phrases: dict[str, list[str]] = {}
    if split is not None:
        phrases.setdefault(PAGES["split"], []).extend(split_phrases(split))
    if sweep is not None:
        phrases.setdefault(PAGES["sweep"], []).extend(sweep_phrases(sweep))
    return phrases


def results_table(results_md: str) -> str:
    """The README's results table from an evaluate.py ``results.md``: its first table (the means with their
    95% intervals), each cell as ``mean [low, high]`` to two places, the bootstrap-mid columns left out and
    the rows' count (n) in a column of its own."""
    lines = results_md[results_md.index("| Variant |") :].split("\n\n", 1)[0].splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    keep = [i for i, name in enumerate(header) if "bootstrap mid" not in name]
    out = ["| " + " | ".join([*(header[i] for i in keep), "n"]) + " |", "|" + "---|" * (len(keep) + 1)]
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        counts = {m.group(1) for m in re.finditer(r"\(n=(\d+)\)", line)}
        figures = [
            re.sub(r"(\d\.\d+)", lambda m: f"{float(m.group(1)):.2f}", re.sub(r"\s*\(n=\d+\)", "", cells[i]))
            for i in keep
        ]
        out.append("| " + " | ".join([*figures, "/".join(sorted(counts))]) + " |")
    return "\n".join(out)


def paired_table(results_md: str) -> str:
    """The README's paired tests from an evaluate.py ``results.md``: its table of differences from each
    variant's baseline, as results.md gives it (same prompt, then per metric the difference with p and
    Holm's p)."""
    start = results_md.index("| Variant | vs |")
    return results_md[start:].split("\n\n", 1)[0].strip()


def readme_results(results_md: str) -> str:
    """The README's two results tables (means, then paired tests), as rendered from ``results_md``."""
    return results_table(results_md) + "\n\n" + paired_table(results_md)


def retrieval_document(config_path: str) -> dict[str, Any]:
    """``graphctx retrieval-eval --json`` on the config (its embeddings cached as the command caches them)."""
    import contextlib
    import io

    from graphctx.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["retrieval-eval", "--config", config_path, "--json", "--thresholds", SWEEP])
    if status:
        sys.exit(status)
    return json.loads(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=TINY)
    parser.add_argument("--retrieval", action="store_true", help="also run the T sweep (minutes on a CPU)")
    parser.add_argument("--results", type=Path, help="print the README's results tables from this results.md")
    args = parser.parse_args()
    if args.results:
        print(readme_results(args.results.read_text()))
        return
    from graphctx.pipeline.config_file import load_config

    sizes = split_sizes(load_config(args.config))
    sweep = retrieval_document(args.config) if args.retrieval else None
    phrases = page_phrases(split=sizes, sweep=sweep)
    root = Path(__file__).resolve().parents[1]
    missing = {}
    for page, wanted in phrases.items():
        text = " ".join((root / page).read_text().split())
        missing[page] = [p for p in wanted if " ".join(p.split()) not in text]
    report = {"splits": sizes, "phrases": phrases, "missing_from_docs": missing}
    print(json.dumps(report, ensure_ascii=False))


if __name__ == "__main__":
    main()
