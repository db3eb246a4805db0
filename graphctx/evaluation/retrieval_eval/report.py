"""The retrieval-eval report: results.md, results.csv, results.json (its one JSON line), sweep.png, and
trec/ (qrels and one run file per method and per T of the sweep:
:mod:`graphctx.evaluation.retrieval_eval.trec`).

Every file is rendered into a temporary folder beside the output folder first and moved into place one
by one (``os.replace``) only once all of them rendered, so a failure leaves the previous report whole;
trec/ is replaced as a whole, so no run file of an earlier sweep's T stays beside the new ones.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from graphctx.evaluation.retrieval_eval.judge import DENSITY_KEYS, MethodResult, RetrievalEvaluation
from graphctx.evaluation.retrieval_eval.measures import NDCG_GAIN
from graphctx.evaluation.retrieval_eval.trec import QRELS, TAG, qrels_text, run_name, run_text
from graphctx.metrics.stats import PairedComparison

FILES = ("results.md", "results.csv", "results.json", "sweep.png")
TREC = "trec"
"""The folder of the TREC files."""


def _metrics_json(result: MethodResult) -> dict[str, Any]:
    metrics: dict[str, Any] = {
        name: {"mean": i.mean, "low": i.low, "high": i.high} for name, i in result.metrics.items()
    }
    for name, c in (result.versus_graph or {}).items():
        metrics[name]["minus_graph"] = {
            "mean": c.mean_difference,
            "low": c.low,
            "high": c.high,
            "p": c.p_value,
        }
    return metrics


def report_json(evaluation: RetrievalEvaluation, about: dict[str, Any]) -> dict[str, Any]:
    """The JSON document of a run: ``about`` (config, split, query counts...), every method, the sweep."""
    return {
        **about,
        "queries": evaluation.queries,
        "pool": evaluation.pool,
        "top_k": evaluation.top_k,
        "ndcg_gain": NDCG_GAIN,
        "methods": {
            r.method: {"threshold": r.threshold, "seconds": r.seconds, **_metrics_json(r)}
            for r in evaluation.methods
        },
        "sweep": [
            {"threshold": r.threshold, "seconds": r.seconds, **(r.density or {}), **_metrics_json(r)}
            for r in evaluation.sweep
        ],
    }


def _cell(result: MethodResult, name: str) -> str:
    interval = result.metrics[name]
    return f"{interval.mean:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def markdown(evaluation: RetrievalEvaluation, about: dict[str, Any]) -> str:
    """Two tables: the methods, then the sweep of T with the graph's density."""
    names = evaluation.metric_names
    lines = [
        "# Retrieval against the dump's links",
        "",
        f"{evaluation.queries} queries ({about.get('split')} split, {about.get('in_split', '?')} of them "
        f"rows of the filtered split) against a pool of {evaluation.pool} questions; relevance: duplicate "
        f"= 2, linked = 1; nDCG gain {NDCG_GAIN}. Mean [95% bootstrap interval over queries].",
        "",
        "| method | T | " + " | ".join(map(_label, names)) + " | seconds |",
        "|---|---|" + "---|" * len(names) + "---|",
    ]
    for r in evaluation.methods:
        threshold = "" if r.threshold is None else f"{r.threshold:.2f}"
        cells = " | ".join(_cell(r, name) for name in names)
        lines.append(f"| {r.method} | {threshold} | {cells} | {r.seconds:.2f} |")
    lines += [
        "",
        "Each method minus graph on the same queries: mean difference [95% paired bootstrap interval], "
        "two-sided paired permutation p (the marginal intervals above overlap far more often than the "
        "paired differences do).",
        "",
        "| method | " + " | ".join(map(_label, names)) + " |",
        "|---|" + "---|" * len(names),
    ]
    for r in evaluation.methods:
        if r.versus_graph:
            cells = " | ".join(_difference(r.versus_graph[name]) for name in names)
            lines.append(f"| {r.method} − graph | {cells} |")
    density = " | ".join(DENSITY_KEYS)
    lines += [
        "",
        f"## Graph PPR by threshold T (k = {evaluation.top_k} for the fallback share)",
        "",
        f"| T | {density} | " + " | ".join(map(_label, names)) + " |",
        "|---|" + "---|" * (len(DENSITY_KEYS) + len(names)),
    ]
    for r in evaluation.sweep:
        shown = " | ".join(_density(key, (r.density or {})[key]) for key in DENSITY_KEYS)
        lines.append(f"| {r.threshold:.2f} | {shown} | " + " | ".join(_cell(r, n) for n in names) + " |")
    return "\n".join(lines) + "\n"


def _label(name: str) -> str:
    """A metric's column heading: nDCG's names its gain."""
    return f"{name} (exp. gain)" if name.startswith("ndcg@") else name


def _difference(c: PairedComparison) -> str:
    return f"{c.mean_difference:+.3f} [{c.low:+.3f}, {c.high:+.3f}] p={c.p_value:.3g}"


def _density(key: str, value: float) -> str:
    if key.endswith("_share"):
        return f"{100 * value:.1f}%"
    return f"{value:.1f}" if key == "mean_degree" else f"{int(value)}"


def csv_text(evaluation: RetrievalEvaluation) -> str:
    """One row per method and per sweep threshold: density columns (sweep rows), each metric's mean, low
    and high."""
    names = evaluation.metric_names
    header = ["kind", "method", "threshold", "seconds", *DENSITY_KEYS]
    header += [f"{name}_{part}" for name in names for part in ("mean", "low", "high")]
    header += [f"{name}_minus_graph_{part}" for name in names for part in ("mean", "low", "high", "p")]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for kind, results in (("method", evaluation.methods), ("sweep", evaluation.sweep)):
        for r in results:
            density = [(r.density or {}).get(key, "") for key in DENSITY_KEYS]
            values = [getattr(r.metrics[n], part) for n in names for part in ("mean", "low", "high")]
            versus = r.versus_graph or {}
            values += [
                getattr(versus[n], part) if n in versus else ""
                for n in names
                for part in ("mean_difference", "low", "high", "p_value")
            ]
            writer.writerow(
                [kind, r.method, "" if r.threshold is None else r.threshold, r.seconds, *density, *values]
            )
    return out.getvalue()


def plot(evaluation: RetrievalEvaluation, path: Path) -> None:
    """sweep.png: the graph's metrics against T (with intervals; dense, BM25 and any retriever not on the
    graph at T as flat lines), and its
    density (mean degree, linked and fallback shares) against T."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    thresholds = [r.threshold for r in evaluation.sweep]
    figure = Figure(figsize=(8, 7), layout="constrained")
    quality, density = figure.subplots(2, 1, sharex=True)
    for name in evaluation.metric_names:
        means = [r.metrics[name].mean for r in evaluation.sweep]
        line = quality.plot(thresholds, means, marker="o", label=f"graph {name}")[0]
        lows, highs = ([getattr(r.metrics[name], side) for r in evaluation.sweep] for side in ("low", "high"))
        quality.fill_between(thresholds, lows, highs, color=line.get_color(), alpha=0.15)
    ndcg = evaluation.metric_names[-1]
    flat = [r for r in evaluation.methods if r.threshold is None]  # not on the graph at T: a line each
    for order, r in enumerate(flat):  # dashed, black to mid-gray in registry order, named beside it
        shade = f"{0.6 * order / max(len(flat) - 1, 1):.2f}"
        quality.axhline(r.metrics[ndcg].mean, linestyle="--", color=shade)
        quality.annotate(f"{r.method} {ndcg}", (thresholds[0], r.metrics[ndcg].mean), fontsize=8)
    quality.set_ylabel("score (95% interval)")
    quality.set_title(f"Graph PPR against the dump's links ({evaluation.queries} queries)")
    quality.legend(fontsize=8)
    for key, label in (
        ("linked_share", "queries with an edge"),
        ("fallback_share", "hits by cosine fallback"),
    ):
        density.plot(thresholds, [r.density[key] for r in evaluation.sweep], marker="o", label=label)
    density.set_ylabel("share")
    degree = density.twinx()
    degree.plot(thresholds, [max(r.density["mean_degree"], 1e-3) for r in evaluation.sweep], "k:", marker="s")
    degree.set_yscale("log")
    degree.set_ylabel("mean degree (dotted, log)")
    density.set_xlabel("threshold T")
    density.legend(fontsize=8, loc="center left")
    figure.savefig(path, dpi=120)


def trec_files(evaluation: RetrievalEvaluation) -> dict[str, str]:
    """File name -> text of the qrels and of every run: each method, then the graph at each T of the
    sweep (run tags ``graphctx.<method>`` and ``graphctx.graph.T<T>``)."""
    files = {QRELS: qrels_text(evaluation.query_ids, evaluation.relevance)}
    for r in evaluation.methods:
        files[run_name(r.method)] = run_text(evaluation.query_ids, r.ranking, f"{TAG}.{r.method}")
    for r in evaluation.sweep:
        name = run_name(r.method, r.threshold)
        files[name] = run_text(evaluation.query_ids, r.ranking, f"{TAG}.{name[4:-4]}")
    return files


def write_report(evaluation: RetrievalEvaluation, about: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Write :data:`FILES` and the :data:`TREC` folder into ``folder`` (see the module docstring); returns
    the JSON document, with ``files`` naming the paths (``files.trec``: the TREC files')."""
    folder.mkdir(parents=True, exist_ok=True)
    trec = trec_files(evaluation)
    paths: dict[str, Any] = {name: str(folder / name) for name in FILES}
    paths[TREC] = {name: str(folder / TREC / name) for name in trec}
    document = report_json(evaluation, {**about, "files": paths})
    with tempfile.TemporaryDirectory(dir=folder, prefix=".retrieval-eval-") as tmp:
        staged = Path(tmp)
        (staged / "results.md").write_text(markdown(evaluation, about))
        (staged / "results.csv").write_text(csv_text(evaluation))
        (staged / "results.json").write_text(json.dumps(document) + "\n")
        plot(evaluation, staged / "sweep.png")
        (staged / TREC).mkdir()
        for name, text in trec.items():
            (staged / TREC / name).write_text(text)
        for name in FILES:
            os.replace(staged / name, folder / name)
        if (folder / TREC).exists():
            os.replace(folder / TREC, staged / "previous-trec")  # removed with the temporary folder
        os.replace(staged / TREC, folder / TREC)
    return document
