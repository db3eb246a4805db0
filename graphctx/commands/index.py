"""Embed the pool (training questions) and build its question graph, cached for `graphctx retrieve`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="YAML config (sections data, model, retrieval)")
    parser.add_argument("--cache-dir", help="graphctx cache folder (default: the config's data.cache_dir)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from graphctx.config import load_config
    from graphctx.evaluation.pool import cache_dir_of, load_config_dataset
    from graphctx.retrieval.graph import density_warning, describe_degrees
    from graphctx.retrieval.index import build_index

    config = load_config(args.config)
    cache_dir = cache_dir_of(config, args.cache_dir)
    train = load_config_dataset(config)["train"]
    index = build_index(train["id"], train["question"], config.retrieval, cache_dir)
    print(f"question graph: {describe_degrees(index.stats)}", file=sys.stderr)
    warning = density_warning(index.stats, config.retrieval)
    if warning:
        print(warning, file=sys.stderr)
    print(json.dumps({"pool": len(index.ids), "dim": index.embeddings.shape[1], **index.stats}), file=out)
    return 0
