"""Judge retrieval against the dump's own links: every retriever of the registry (graph PPR, dense, BM25,
the hybrid and the config's ``retrieval.extra`` plug-ins), and a sweep of T.

Queries are the evaluated split's questions linked (PostLinks.xml: duplicate = 2, linked = 1) to older
pool questions (see graphctx.evaluation.retrieval_eval.queries for what is counted and why). Writes
results.md, results.csv, results.json and sweep.png to --evaluation.retrieval_eval_dir (default
<trainer.default_root_dir>/retrieval_eval) for the split --evaluation.split; prints the markdown, or the
JSON line with --json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TextIO

from graphctx.command_line import add_config
from graphctx.commands import wrote
from graphctx.errors import ConfigError

RENAMED = {"--split": "--evaluation.split", "--output-dir": "--evaluation.retrieval_eval_dir"}
"""Options of older releases -> the config key that replaced them (one spelling for each setting)."""
MAX_THRESHOLDS = 200
"""The most values of T one sweep runs (each rebuilds the question graph): a larger sweep is refused."""


def parse_thresholds(text: str) -> list[float]:
    """``0.5,0.6,0.7`` or ``start:stop:step`` (stop included) -> the list of thresholds: finite numbers,
    a range that runs upwards, at most :data:`MAX_THRESHOLDS` of them."""
    try:
        if ":" in text:
            start, stop, step = (float(part) for part in text.split(":"))
            if not all(math.isfinite(value) for value in (start, stop, step)):
                raise ValueError("start, stop and step must be finite numbers")
            if step <= 0:
                raise ValueError("the step must be positive")
            if stop < start:
                raise ValueError(f"the range is reversed (stop {stop:g} is below start {start:g})")
            count = round((stop - start) / step) + 1
            if count > MAX_THRESHOLDS:
                raise ValueError(f"{count} values; a sweep runs at most {MAX_THRESHOLDS}: take a larger step")
            return [round(start + i * step, 6) for i in range(count)]
        values = [float(part) for part in text.split(",") if part.strip()]
        if len(values) > MAX_THRESHOLDS:
            raise ValueError(f"{len(values)} values; a sweep runs at most {MAX_THRESHOLDS}")
        return values
    except ValueError as error:
        raise ConfigError(f"--thresholds {text!r}: {error} (give 0.5,0.6 or start:stop:step)") from error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "YAML config (sections data, retrieval, evaluation)")
    parser.add_argument("--json", action="store_true", help="print the one JSON line instead of markdown")
    parser.add_argument(
        "--thresholds", default="0.50:0.90:0.05", help="T values of the sweep: 0.5,0.6 or start:stop:step"
    )
    parser.add_argument("--recall-k", type=int, default=10, help="a second recall cut-off beside top_k")
    parser.add_argument(
        "--keep-links", action="store_true", help="leave the query's links to its targets in its text"
    )


def execute(args: argparse.Namespace, out: TextIO) -> int:
    from graphctx.data.stackexchange import IGNORED_LINKS
    from graphctx.evaluation.retrieval_eval.judge import check_thresholds, evaluate_retrieval
    from graphctx.evaluation.retrieval_eval.queries import (
        check_link_source,
        few_queries_warning,
        load_link_queries,
    )
    from graphctx.evaluation.retrieval_eval.report import FILES, TREC, markdown, write_report
    from graphctx.pipeline.config_file import run_config

    thresholds = check_thresholds(parse_thresholds(args.thresholds), "--thresholds")
    if args.recall_k < 1:
        raise ConfigError(f"--recall-k {args.recall_k}: must be at least 1")
    config = run_config(args)
    split = config.evaluation.split
    dataset_settings = config.data.dataset
    check_link_source(dataset_settings, split)
    dataset = config.load_dataset()
    queries, links = load_link_queries(dataset_settings, dataset, split, mask=not args.keep_links)
    ignored = {key: links.ignored[key] for key in IGNORED_LINKS}
    if any(ignored.values()):
        counts = ", ".join(f"{n} {IGNORED_LINKS[key]}" for key, n in ignored.items() if n)
        print(f"note: {links.links_file}: ignored {counts}", file=sys.stderr)
    warning = few_queries_warning(len(queries), split)
    if warning:
        print(warning, file=sys.stderr)
    pool, judged, masked_pool = _embedded(
        config, dataset["train"], queries, links if not args.keep_links else None, config.cache_dir
    )
    settings = config.retrieval
    recall_ks = sorted({settings.top_k, args.recall_k})
    evaluation = evaluate_retrieval(pool, judged, settings, thresholds, recall_ks)
    about = {
        "config": str(config.path),
        "split": split,
        "in_split": sum(query.in_split for query in queries),
        "graded": {"duplicate": _count(queries, 2), "linked": _count(queries, 1)},
        "link_rows": links.rows,
        "ignored_link_rows": ignored,
        "masked_links": not args.keep_links,
        "masked_pool_questions": masked_pool,
        "embedding_model": settings.embedding_model,
    }
    folder = config.retrieval_eval_dir
    document = write_report(evaluation, about, folder)
    print(json.dumps(document) if args.json else markdown(evaluation, about), file=out)
    wrote(out, [*(folder / name for name in FILES), folder / TREC], args.json)
    return 0


def _count(queries: list, grade: int) -> int:
    """Relevant (query, pool question) pairs of ``grade``."""
    return sum(list(query.relevant.values()).count(grade) for query in queries)


def _embedded(config, train, queries, links, cache_dir):
    """Pool and queries embedded once each (cached like the retrieval index's embeddings), on the CPU; with
    ``links``, the pool's links to the queries masked first. Also the number of pool texts masked."""
    from graphctx.evaluation.retrieval_eval.judge import Pool, Queries
    from graphctx.evaluation.retrieval_eval.queries import masked_pool_texts
    from graphctx.retrieval.builders import build_embeddings

    settings = config.retrieval
    ids, pool_texts, masked = list(train["id"]), list(train["question"]), 0
    if links is not None:
        pool_texts, masked = masked_pool_texts(ids, pool_texts, links, [q.id for q in queries])
    pool = Pool(ids, pool_texts, build_embeddings(pool_texts, settings, cache_dir=cache_dir).cpu())
    texts = [query.text for query in queries]
    embeddings = build_embeddings(texts, settings, cache_dir=cache_dir).cpu()
    return pool, Queries([q.id for q in queries], texts, embeddings, [q.relevant for q in queries]), masked
