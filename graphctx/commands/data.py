"""Build the Q&A dataset from a Stack Exchange dump (or a table) and print a Table-1-style summary."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from transformers import AutoTokenizer

from graphctx.config import load_config
from graphctx.data import DatasetSettings, prepare_qa_dataset
from graphctx.model import ModelSpec, load_tokenizer

ROWS = [
    ("rows read", "rows"),
    ("questions", "questions"),
    ("answers", "answers"),
    ("skipped rows (missing Id/Title/Body/date)", "skipped_rows"),
    ("with accepted answer", "with_accepted_answer"),
    ("removed: accepted answer of another question", "removed_answer_parent_mismatch"),
    ("removed: no accepted answer", "removed_no_accepted_answer"),
    ("removed: linked duplicate", "removed_linked_duplicate"),
    ("removed: duplicate title", "removed_duplicate_title"),
    ("removed: short answer", "removed_short_answer"),
    ("removed: link-only answer", "removed_link_only_answer"),
    ("removed: too many tokens", "removed_too_long"),
    ("kept", "kept"),
    ("outside the split date ranges", "outside_split_ranges"),
    ("train", "train"),
    ("validation", "validation"),
    ("test", "test"),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", help="a Stack Exchange site folder or Posts.xml, or a .json/.jsonl/.csv/.parquet"
    )
    parser.add_argument("--config", help="take filters, split dates and tokenizer from this YAML config")
    parser.add_argument("--tokenizer", help="HF id or folder of the tokenizer for the token-length filter")
    parser.add_argument("--no-token-limit", action="store_true", help="skip the token-length filter")
    parser.add_argument(
        "--cache-dir", help="graphctx cache folder (default $GRAPHCTX_CACHE or .cache/graphctx)"
    )


def run(args: argparse.Namespace) -> int:
    if args.config:
        config = load_config(args.config)
        settings, spec, cache_dir = (
            config.data.dataset,
            config.model.spec,
            args.cache_dir or config.data.cache_dir,
        )
    else:
        settings, spec, cache_dir = DatasetSettings(), ModelSpec(), args.cache_dir
    settings = replace(settings, source=args.path)
    tokenizer = None
    if args.no_token_limit:
        settings = replace(settings, filters=replace(settings.filters, max_tokens=None))
    elif settings.filters.max_tokens is not None:
        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer) if args.tokenizer else load_tokenizer(spec)
    _, summary = prepare_qa_dataset(settings, cache_dir, tokenizer)
    width = max(len(label) for label, _ in ROWS)
    print(f"{'source':<{width}}  {summary['source']}")
    for label, key in ROWS:
        print(f"{label:<{width}}  {summary.get(key, 0):>8,}")
    print(json.dumps({key: summary.get(key, 0) for _, key in ROWS}))
    return 0
