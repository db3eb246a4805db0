"""Rank the pool's past questions for one question (personalized PageRank or dense, per the config)."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from graphctx.command_line import add_config
from graphctx.commands import add_question_arguments, read_question


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "YAML config (sections data, model, retrieval)")
    add_question_arguments(parser, "the new question (title and body as one text)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


def execute(args: argparse.Namespace, out: TextIO) -> int:
    question = read_question(args)  # before anything loads
    from graphctx.paper import EMBEDDING, is_reference
    from graphctx.pipeline.config_file import run_config
    from graphctx.pipeline.pool import pool_retriever

    config = run_config(args)
    settings = config.retrieval
    train = config.load_dataset()["train"]
    hits = pool_retriever(train, settings, config.cache_dir).retrieve([question])[0]
    titles = dict(zip(train["id"], train["title"], strict=True))
    rows = [
        {"rank": rank, "id": hit.id, "score": hit.score, "fallback": hit.fallback, "title": titles[hit.id]}
        for rank, hit in enumerate(hits, start=1)
    ]
    stand_in = not is_reference(EMBEDDING, settings.embedding_model)
    if args.json:
        print(
            json.dumps(
                {
                    "question": question,
                    "method": settings.method,
                    "embedding_model": settings.embedding_model,
                    "stand_in": stand_in,
                    "hits": rows,
                }
            ),
            file=out,
        )
        return 0
    if stand_in:
        print(f"# embedder {settings.embedding_model}: a stand-in for the paper's {EMBEDDING.name}", file=out)
    for row in rows:
        marker = " (cosine fallback)" if row["fallback"] else ""
        print(f"{row['rank']:>3}  {row['score']:.6f}  #{row['id']}  {row['title']}{marker}", file=out)
    return 0
