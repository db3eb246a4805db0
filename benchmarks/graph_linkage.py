"""How many evaluated questions link to the question graph: before and after one embedding per question.

Builds the pool graph of ``--config`` (default ``configs/tiny.yaml``: cardano, MiniLM) at each threshold
and counts, with :func:`graphctx.retrieval.graph.linkage_stats`, the test questions with no edge above T
and those topped up by cosine, three ways: no instruction (the symmetric default), bge's instruction before
queries only (what the paper configs did before: query-pool cosines instructed, pool-pool ones not), and
the instruction before both sides. Prints one JSON object as its last line.

    python benchmarks/graph_linkage.py [--config configs/tiny.yaml] [--thresholds 0.5 0.8]
"""

from __future__ import annotations

import argparse
import dataclasses
import json

from graphctx.pipeline.config_file import load_config
from graphctx.retrieval.embeddings import embed_texts, encode, load_encoder
from graphctx.retrieval.graph import (
    build_question_graph,
    degree_stats,
    graph_fallbacks,
    linkage_stats,
    query_edges,
)

BGE = "Represent this sentence for searching relevant passages: "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/tiny.yaml")
    parser.add_argument("--thresholds", type=float, nargs="+", default=None, help="default: the config's T")
    args = parser.parse_args()
    config = load_config(args.config)
    cache = config.cache_dir
    data = config.load_dataset()
    train, split = data["train"], data[config.evaluation.split]
    encoder = load_encoder(config.retrieval)
    report: dict = {"pool": len(train), "queries": len(split)}
    for threshold in args.thresholds or [config.retrieval.threshold]:
        plain = dataclasses.replace(config.retrieval, threshold=threshold, instruction="")
        instructed = dataclasses.replace(plain, instruction=BGE)
        cases = {
            "no instruction": (plain, plain),
            "before: instruction on queries only": (plain, instructed),
            "after: instruction on both sides": (instructed, instructed),
        }
        report[f"T={threshold}"] = {}
        for name, (pool_side, query_side) in cases.items():
            pool = embed_texts(train["question"], pool_side, cache_dir=cache, model=encoder)
            graph = build_question_graph(pool, pool_side)
            edges = query_edges(encode(encoder, split["question"], query_side), pool, pool_side)
            fallbacks = graph_fallbacks(graph, edges, pool_side.top_k)
            report[f"T={threshold}"][name] = linkage_stats(fallbacks, degree_stats(graph))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
