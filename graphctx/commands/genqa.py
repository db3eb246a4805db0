"""Train the GenQA baseline: a seq2seq model that writes the answer from the retrieved answers.

Each training question is paired with the accepted answers of its ``retrieval.top_k`` nearest training
questions (dense retrieval, itself left out); the model learns to write its accepted answer from them
(:mod:`graphctx.baselines.genqa`). Its progress on stderr: the inputs (pool index, retrieval, encoding),
then the training steps. The trained folder goes to ``evaluation.genqa_model`` (default
``<trainer.default_root_dir>/genqa``), where ``evaluate.py --variants GenQA`` reads it.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TextIO

from graphctx.command_line import add_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "YAML config (data, retrieval, evaluation.genqa_model)")
    parser.add_argument(
        "--base", help="seq2seq model to fine-tune (Hub id or folder; default facebook/bart-large)"
    )
    parser.add_argument("--epochs", type=int, default=3, help="training epochs (default 3)")
    parser.add_argument(
        "--max-steps", type=int, default=-1, help="stop after this many steps (default: no limit)"
    )
    parser.add_argument("--batch-size", type=int, default=8, help="examples per step (default 8)")
    parser.add_argument(
        "--learning-rate", type=float, default=3e-5, help="AdamW learning rate (default 3e-5)"
    )
    parser.add_argument("--limit", type=int, help="train on the first N training questions only")


def check_arguments(args: argparse.Namespace) -> None:
    """One ``ConfigError`` naming the option when a count could train nothing (or forever)."""
    from graphctx.errors import ConfigError

    for option, value in (("--epochs", args.epochs), ("--batch-size", args.batch_size)):
        if value < 1:
            raise ConfigError(f"{option} {value}: must be at least 1")
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit {args.limit}: must be at least 1 (omit it to train on every question)")
    if args.max_steps == 0 or args.max_steps < -1:
        raise ConfigError(f"--max-steps {args.max_steps}: must be at least 1, or -1 for no limit")
    if args.learning_rate <= 0:
        raise ConfigError(f"--learning-rate {args.learning_rate}: must be positive")


def check_seq2seq(base: str) -> None:
    """Refuse, in one line, a ``--base`` that is not an encoder-decoder model (GenQA writes the answer with
    a seq2seq model: BART, T5)."""
    from transformers import AutoConfig

    from graphctx.errors import ConfigError

    try:
        config = AutoConfig.from_pretrained(base)
    except (OSError, ValueError) as error:
        raise ConfigError(f"--base {base}: no model config found ({error})") from error
    if not config.is_encoder_decoder:
        raise ConfigError(
            f"--base {base}: a {config.model_type} model is not an encoder-decoder; GenQA fine-tunes a "
            "seq2seq model (BART, T5)"
        )


def execute(args: argparse.Namespace, out: TextIO) -> int:
    from graphctx.baselines.genqa import DEFAULT_BASE, encode_examples, train
    from graphctx.errors import ConfigError
    from graphctx.paper import availability, how_to_get
    from graphctx.pipeline.config_file import run_config
    from graphctx.pipeline.pool import pool_retriever
    from graphctx.progress import Progress

    check_arguments(args)
    config = run_config(args)
    base = args.base or DEFAULT_BASE
    if availability(base) == "missing":
        raise ConfigError(how_to_get("--base", base))
    check_seq2seq(base)
    pool = config.load_dataset()["train"]
    rows = sorted(pool, key=lambda row: int(row["id"]))[: args.limit]
    settings = dataclasses.replace(config.retrieval, method="dense", top_k=config.retrieval.top_k + 1)
    with Progress("genqa inputs", 3, "steps") as progress:
        retriever = pool_retriever(pool, settings, config.cache_dir)
        progress.advance(1, "pool index ready")
        hits = retriever.retrieve([row["question"] for row in rows])
        progress.advance(1, f"{len(rows)} questions retrieved")
        by_id = {int(row["id"]): row for row in pool}
        candidates = [
            [by_id[h.id]["answer"] for h in found if h.id != int(row["id"])][: config.retrieval.top_k]
            for row, found in zip(rows, hits, strict=True)
        ]
        from transformers import AutoTokenizer

        examples = encode_examples(
            AutoTokenizer.from_pretrained(base),
            [row["question"] for row in rows],
            candidates,
            [row["answer"] for row in rows],
        )
        progress.advance(1, f"{len(examples)} examples encoded")
    output = config.genqa_dir
    train(base, examples, output, args.epochs, args.batch_size, args.learning_rate, args.max_steps)
    print(f"GenQA: trained {base} on {len(examples)} questions; saved to {output}", file=out)
    return 0
