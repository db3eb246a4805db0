"""Embed the pool (training questions) and build its question graph, cached for `graphctx retrieve`; say
how the evaluated split's questions link to it (no edge above T, topped up by cosine). With ``--add``,
extend the cached index by new questions instead of rebuilding it; with ``--shards``, embed the pool in
cached shards (``--worker``: only this process's, for the ranks of a job or the tasks of a SLURM array)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from graphctx.command_line import add_config

if TYPE_CHECKING:
    from graphctx.retrieval.settings import RetrievalSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "YAML config (sections data, model, retrieval)")
    parser.add_argument(
        "--json", action="store_true", help="print the report as one JSON line (the summary goes to stderr)"
    )
    parser.add_argument(
        "--add",
        metavar="PATH",
        help="a .jsonl/.json/.csv/.parquet table of new questions (columns id, question): embed only them "
        "and add them to the cached index of the pool (the index a rebuild of the pool with these rows "
        "appended gives)",
    )
    parser.add_argument(
        "--edit",
        metavar="PATH",
        help="a table of edited questions (columns id, question): re-embed only them and update the cached "
        "index in place (the index a rebuild of the edited pool gives)",
    )
    parser.add_argument(
        "--delete",
        metavar="PATH",
        help="a table of question ids to delete (column id): update the cached index without a rebuild",
    )
    parser.add_argument(
        "--pool-dir",
        help="apply --add/--edit/--delete to the live pool of graphctx serve in this folder (an answer "
        "column sets the accepted answers); a running server sees it at its next batch",
    )
    parser.add_argument(
        "--shards",
        type=int,
        metavar="N",
        help="embed the pool in N cached shards (a rerun embeds only the missing ones), then merge them",
    )
    parser.add_argument(
        "--worker",
        action="store_true",
        help="with --shards: embed only this process's shards (worker number and count from "
        "SLURM_ARRAY_TASK_ID/COUNT, RANK/WORLD_SIZE or SLURM_PROCID/NTASKS) and stop",
    )


def added_questions(path: str) -> tuple[list[int], list[str]]:
    """Ids and texts of the ``--add`` table; a missing column or a bad id is a one-line ``DataError``
    (questions of the evaluated splits: :func:`check_not_evaluated`)."""
    from graphctx.data.records import load_table
    from graphctx.errors import DataError

    table = load_table(path, "train")
    missing = [column for column in ("id", "question") if column not in table.column_names]
    if missing:
        raise DataError(f"--add {path}: missing column(s) {', '.join(missing)}")
    ids, texts = [], []
    for row, (qid, text) in enumerate(zip(table["id"], table["question"], strict=True), start=1):
        if not isinstance(qid, int) or not isinstance(text, str) or not text.strip():
            raise DataError(f"--add {path}: row {row}: needs an integer id and a non-empty question")
        ids.append(qid)
        texts.append(text)
    return ids, texts


def table_rows(path: str, option: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """The rows of an ``--edit``/``--delete`` table (``columns`` required, integer ids, non-empty texts);
    a bad one is a one-line ``DataError``."""
    from graphctx.data.records import load_table
    from graphctx.errors import DataError

    table = load_table(path, "train")
    missing = [column for column in columns if column not in table.column_names]
    if missing:
        raise DataError(f"{option} {path}: missing column(s) {', '.join(missing)}")
    rows = table.to_list()
    for number, row in enumerate(rows, start=1):
        if not isinstance(row["id"], int) or ("question" in columns and not str(row["question"]).strip()):
            raise DataError(f"{option} {path}: row {number}: needs an integer id and a non-empty question")
    return rows


def pool_update(args: argparse.Namespace) -> tuple[Any, dict[int, str]]:
    """The ``PoolUpdate`` of ``--add``/``--edit``/``--delete`` and the answers their tables give."""
    from graphctx.retrieval.scale.updates import PoolUpdate

    added = table_rows(args.add, "--add", ("id", "question")) if args.add else []
    edited = table_rows(args.edit, "--edit", ("id", "question")) if args.edit else []
    deleted = table_rows(args.delete, "--delete", ("id",)) if args.delete else []
    answers = {row["id"]: row["answer"] for row in [*added, *edited] if isinstance(row.get("answer"), str)}
    update = PoolUpdate(
        deleted=tuple(row["id"] for row in deleted),
        edited=tuple((row["id"], row["question"]) for row in edited),
        added=tuple((row["id"], row["question"]) for row in added),
    )
    return update, answers


def check_not_evaluated(path: str, added: tuple[list[int], list[str]], dataset: Mapping[str, Any]) -> None:
    """Refuse, in one line, an ``--add`` question that is a validation or test question (by id or text): in
    the pool it would be retrieved for itself, and the split's linkage would report it linked. A negative
    id is refused too (graph retrieval's no-node mark is -1)."""
    from graphctx.errors import DataError

    ids, texts = added
    for split in (name for name in dataset if name != "train"):
        taken_ids, taken_texts = set(dataset[split]["id"]), set(dataset[split]["question"])
        for row, (qid, text) in enumerate(zip(ids, texts, strict=True), start=1):
            if qid in taken_ids or text in taken_texts:
                raise DataError(
                    f"--add {path}: row {row} (id {qid}) is a question of the {split} split; add only "
                    "questions that are not evaluated (an evaluated question in the pool finds itself)"
                )
    negative = next((row for row, qid in enumerate(ids, start=1) if qid < 0), None)
    if negative is not None:
        raise DataError(f"--add {path}: row {negative}: question id {ids[negative - 1]} is negative")


def embed_pool_shards(
    train: Iterable[Mapping[str, Any]],
    settings: RetrievalSettings,
    cache_dir: str | None,
    shards: int,
    worker: bool,
) -> dict[str, object]:
    """Embed the pool's ``shards`` (all of them, merged into the pool's embeddings, or with ``worker`` only
    this process's); what was embedded and what was found cached."""
    from graphctx.errors import ConfigError
    from graphctx.retrieval.scale.shards import embed_shards, merge_shards, worker_shards

    if shards < 1:
        raise ConfigError(f"--shards: must be at least 1, got {shards}")
    texts = [row["question"] for row in {int(row["id"]): row for row in train}.values()]
    if worker:
        mine = worker_shards(shards)
        embedded = embed_shards(texts, settings, cache_dir, shards, mine)
        return {"shards": shards, "worker_shards": mine, "embedded": embedded}
    _, embedded = merge_shards(texts, settings, cache_dir, shards)
    return {"shards": shards, "embedded": embedded, "merged": len(texts)}


def apply_update(args: argparse.Namespace, config: Any, dataset: Mapping[str, Any], out: TextIO) -> int:
    """``--add``/``--edit``/``--delete`` on a served live pool (``--pool-dir``), or ``--edit``/``--delete``
    on the config's cached pool index: a readable line of what changed (``--json``: the JSON report, the
    line on stderr), then the line naming what it wrote."""
    from graphctx.cache import cache_root
    from graphctx.commands import wrote
    from graphctx.pipeline.pool import pool_index

    update, answers = pool_update(args)
    if update.added:
        ids, questions = zip(*update.added, strict=True)
        check_not_evaluated(args.add, (list(ids), list(questions)), dataset)
    if args.pool_dir is not None:
        from graphctx.serve.live_pool import LivePool

        live = LivePool(args.pool_dir, config.retrieval, config.cache_dir)
        live.start(dataset["train"])
        report, written = live.apply(update, answers), args.pool_dir
    else:
        from graphctx.retrieval.scale.updates import update_index

        rows = list({int(row["id"]): row for row in dataset["train"]}.values())
        index, _ = update_index(
            pool_index(rows, config.retrieval, config.cache_dir),
            [row["question"] for row in rows],
            update,
            config.retrieval,
            config.cache_dir,
        )
        report = {"pool": len(index.ids), "dim": index.embeddings.shape[1], **index.stats}
        report |= {"added": len(update.added), "edited": len(update.edited), "deleted": len(update.deleted)}
        written = cache_root(config.cache_dir) / "retrieval-index"
    changed = f"added {len(update.added)}, edited {len(update.edited)}, deleted {len(update.deleted)}"
    print(f"pool updated: {changed}", file=sys.stderr if args.json else out)
    if args.json:
        print(json.dumps(report), file=out)
    wrote(out, [written], args.json)
    return 0


def execute(args: argparse.Namespace, out: TextIO) -> int:
    from graphctx.cache import cache_root
    from graphctx.commands import wrote
    from graphctx.errors import ConfigError
    from graphctx.pipeline.config_file import run_config
    from graphctx.pipeline.pool import pool_index
    from graphctx.retrieval.builders import build_embeddings, build_query_edges
    from graphctx.retrieval.graph import (
        density_warning,
        describe_degrees,
        describe_linkage,
        graph_fallbacks,
        linkage_stats,
    )
    from graphctx.retrieval.numerics import pinned_threads
    from graphctx.retrieval.scale.incremental import extend_index
    from graphctx.retrieval.scale.knn import describe_build

    config = run_config(args, devices=("retrieval",))
    cache_dir = config.cache_dir
    dataset = config.load_dataset()
    train, split = dataset["train"], config.evaluation.split
    if args.worker and args.shards is None:
        raise ConfigError("--worker: needs --shards N")
    if args.pool_dir is not None or args.edit or args.delete:
        return apply_update(args, config, dataset, out)
    added = None if args.add is None else added_questions(args.add)
    if added is not None:
        check_not_evaluated(args.add, added, dataset)
    if args.shards is not None:
        sharded = embed_pool_shards(train, config.retrieval, cache_dir, args.shards, args.worker)
        print(json.dumps(sharded), file=sys.stderr if not args.worker else out)
        if args.worker:
            return 0
    index = pool_index(train, config.retrieval, cache_dir)
    if added is not None:
        texts = [row["question"] for row in {int(row["id"]): row for row in train}.values()]
        index = extend_index(index.ids.tolist(), texts, *added, config.retrieval, cache_dir)
    as_json = args.json
    summary = sys.stderr if as_json else out  # the readable summary is the result without --json
    print(f"question graph: {describe_degrees(index.stats)}; {describe_build(index.stats)}", file=summary)
    warning = density_warning(index.stats, config.retrieval.threshold)
    if warning:
        print(warning, file=sys.stderr)
    report = {"pool": len(index.ids), "dim": index.embeddings.shape[1], **index.stats}
    if added is not None:
        report["added"] = len(added[0])
    if split in dataset and split != "train":
        queries = build_embeddings(dataset[split]["question"], config.retrieval, cache_dir=cache_dir)
        with pinned_threads(config.retrieval.cpu_threads, "cpu"):
            edges = build_query_edges(queries, index.embeddings, config.retrieval)
        fallbacks = graph_fallbacks(index.graph, edges, config.retrieval.top_k)
        report["linkage"] = {"split": split, **linkage_stats(fallbacks, index.stats)}
        print(f"{split} questions: {describe_linkage(report['linkage'])}", file=summary)
    if as_json:
        print(json.dumps(report), file=out)
    folder = cache_root(cache_dir) / "retrieval-index"
    wrote(out, [folder], as_json)  # the cached index of the pool, read by retrieve and evaluate.py
    return 0
