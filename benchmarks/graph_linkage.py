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
from graphctx.retrieval.builders import build_embeddings, build_encoder, build_graph, build_query_edges
from graphctx.retrieval.embeddings import encode
from graphctx.retrieval.graph import degree_stats, graph_fallbacks, linkage_stats

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
    encoder = build_encoder(config.retrieval)
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
            pool = build_embeddings(train["question"], pool_side, cache_dir=cache, model=encoder)
            graph = build_graph(pool, pool_side)
            queries = encode(
                encoder,
                split["question"],
                instruction=query_side.instruction,
                batch_size=query_side.embedding_batch_size,
                cpu_threads=query_side.cpu_threads,
            )
            edges = build_query_edges(queries, pool, pool_side)
            fallbacks = graph_fallbacks(graph, edges, pool_side.top_k)
            report[f"T={threshold}"][name] = linkage_stats(fallbacks, degree_stats(graph))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
