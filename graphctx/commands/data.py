"""Build the Q&A dataset from a Stack Exchange dump (or a table) and print a Table-1-style summary."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from jsonargparse import ArgumentParser

from graphctx.command_line import add_config

ROWS = [
    ("rows read", "rows"),
    ("questions", "questions"),
    ("answers", "answers"),
    ("skipped rows (missing Id/Title/Body/date)", "skipped_rows"),
    ("removed: fabricated watermark post", "removed_fabricated"),
    ("removed: duplicate link to or from a watermark post", "removed_fabricated_links"),
    ("ignored: PostLinks.xml self-link", "ignored_self_links"),
    ("ignored: PostLinks.xml row without ids", "ignored_malformed_links"),
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
    ("removed from train: answer after train end", "removed_answer_after_split"),
    ("train", "train"),
    ("validation", "validation"),
    ("test", "test"),
]
DATED = {"questions": "dump", "kept": "kept", "train": "train", "validation": "validation", "test": "test"}
"""Rows followed by the creation dates (first .. last) of what they count: summary keys ``<prefix>_first``
and ``<prefix>_last``."""


def add_arguments(parser: ArgumentParser) -> None:
    parser.add_argument(
        "path",
        help="a Stack Exchange site folder, Posts.xml or site .7z archive, or a .json/.jsonl/.csv/.parquet",
    )
    parser.add_argument("--tokenizer", help="HF id or folder of the tokenizer for the token-length filter")
    parser.add_argument("--no-token-limit", action="store_true", help="skip the token-length filter")
    add_config(parser, "take filters, split and tokenizer from this YAML config", required=False)
    parser.set_defaults({"data.dataset.source": ""})  # the path argument is the source


def execute(args: argparse.Namespace, out: TextIO) -> int:
    from dataclasses import replace

    from graphctx.data import prepare_qa_dataset
    from graphctx.data.build import EmptySplitError
    from graphctx.data.sources import check_source
    from graphctx.pipeline.config_file import run_config

    config = run_config(args, devices=())  # runs on the CPU
    settings = replace(config.data.dataset, source=args.path)
    spec, cache_dir = config.model.spec, config.cache_dir
    check_source(settings.source)  # a wrong path is named before the tokenizer's model loads
    tokenizer = None
    if args.no_token_limit:
        settings = replace(settings, filters=replace(settings.filters, max_tokens=None))
    elif settings.filters.max_tokens is not None:
        from transformers import AutoTokenizer

        from graphctx.model import load_tokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer) if args.tokenizer else load_tokenizer(spec)
    try:
        _, summary = prepare_qa_dataset(settings, cache_dir, tokenizer)
    except EmptySplitError as error:  # the table of what was read, then the error line
        print_summary(error.summary, settings.split, out)
        raise
    print_summary(summary, settings.split, out)
    return 0


def print_summary(summary: dict[str, Any], split: Any, out: TextIO) -> None:
    """The table (each count, the dates of the dump, the kept questions and each split), then one JSON
    line with every count and date."""
    width = max(len(label) for label, _ in ROWS)
    if summary.get("split_by") == "fractions":
        shares = f"{split.train_fraction}/{split.validation_fraction}/{split.test_fraction}"
        how = f"fractions {shares}, oldest first"
    else:
        how = "dates (data.dataset.split.*_start/_end)"
    print(f"{'source':<{width}}  {summary['source']}", file=out)
    print(f"{'split by':<{width}}  {how}", file=out)
    for label, key in ROWS:
        dates = ""
        if key in DATED:
            first, last = (summary.get(f"{DATED[key]}_{end}") for end in ("first", "last"))
            dates = f"  {_day(first)} .. {_day(last)}" if first else ""
        print(f"{label:<{width}}  {summary.get(key, 0):>8,}{dates}", file=out)
    manifest = summary.get("manifest") or {}

    def file_line(label: str, item: dict[str, Any]) -> str:
        kind = item.get("compression") or item.get("format")
        packed = f"  ({kind})" if kind else ""
        return (
            f"{label:<{width}}  {item['name']}  {item['size']:,} bytes  sha256 {item['sha256'][:16]}{packed}"
        )

    for item in [manifest["archive"]] if manifest.get("archive") else []:
        print(file_line("archive", item), file=out)
    for item in manifest.get("files", []):
        print(file_line("dump file", item), file=out)
    if manifest.get("first_post"):
        print(
            f"{'posts dated':<{width}}  {_day(manifest['first_post'])} .. {_day(manifest['last_post'])}",
            file=out,
        )
    values = {key: summary.get(key, 0) for _, key in ROWS}
    values.update({key: value for key, value in summary.items() if key.endswith(("_first", "_last"))})
    values["split_by"] = summary.get("split_by")
    values["answer_rule"] = summary.get("answer_rule")
    values["manifest"] = manifest
    print(json.dumps(values), file=out)


def _day(moment: str | None) -> str:
    """``2021-04-27T15:06:44.553000+00:00`` -> ``2021-04-27 15:06`` (UTC)."""
    return moment[:16].replace("T", " ") if moment else "-"
