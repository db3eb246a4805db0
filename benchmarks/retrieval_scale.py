"""Retrieval at scale: exact vs k-NN (Faiss HNSW) graph build, power iteration vs forward push, with
igraph's personalized_pagerank and PyG's ``get_ppr`` (when its numba is installed) on the same graph.

    nice python benchmarks/retrieval_scale.py --sizes 20000 100000 300000 1000000

Pools are synthetic clustered unit embeddings (dim 384, seeded; ``--clusters`` centres, per-point noise
``--spread``), queries are fresh points of the same clusters linked by the graph's own rule. Each size runs
in a fresh subprocess (this script with ``--one N``) so its peak RSS (``resource.getrusage`` maxrss of
that process: embeddings, builds and PageRank together) is its own. The exact build and power iteration
run only up to ``--exact-max`` nodes. Latency is per query, one query at a time, on one thread.
``agreement_top10``: share of push's top-10 equal to power's, rank by rank. ``edge_recall``: above-T edges
of ``--recall-sample`` seeded nodes that the knn graph has. Prints ONE JSON line.

Measured (2 shared CPU cores, ``--sizes 20000 --queries 30``; larger sizes not yet run):
{"size": 20000, "knn_build_s": 17.59, "edge_recall": 1.0, "mean_degree": 10.06, "linked_queries": 30,
"push": {"p50_ms": 9.72, "p95_ms": 12.24}, "exact_build_s": 3.27, "power": {"p50_ms": 3.11, "p95_ms": 4.94},
"agreement_top10": 0.967, "igraph": {"p50_ms": 5.01, "p95_ms": 6.22}, "peak_rss_gib": 1.72}
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np
import torch


def clustered(count: int, dim: int, clusters: int, spread: float, seed: int) -> torch.Tensor:
    """Unit vectors: a random centre of ``clusters`` (the same for every ``seed``) plus Gaussian noise of norm
    about ``spread``; ``seed`` draws the points."""
    generator = torch.Generator().manual_seed(0)
    centres = torch.nn.functional.normalize(torch.randn(clusters, dim, generator=generator), dim=1)
    generator.manual_seed(1 + seed)
    pick = torch.randint(0, clusters, (count,), generator=generator)
    noise = torch.randn(count, dim, generator=generator) * (spread / dim**0.5)
    return torch.nn.functional.normalize(centres[pick] + noise, dim=1)


def latencies(ranker, edges, queries: int, k: int = 10) -> tuple[list[float], torch.Tensor]:
    """Per-query seconds of ``ranker.run`` one query at a time, and the top-k ids [queries, k]."""
    from graphctx.retrieval.pagerank import QueryEdges

    times, ids = [], []
    for query in range(queries):
        pick = edges.query == query
        one = QueryEdges(edges.query[pick] * 0, edges.node[pick], edges.weight[pick], 1)
        start = time.perf_counter()
        result = ranker.run(one, k)
        if result.node_ids.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        ids.append(result.node_ids[0])
    return times, torch.stack(ids)


def igraph_latency(graph, edges, queries: int, alpha: float) -> list[float]:
    """Per-query seconds of igraph's personalized_pagerank (PRPACK) on the graph plus the query node."""
    import igraph

    from graphctx.retrieval.pagerank import QueryEdges

    graph, edges = graph.cpu(), QueryEdges(edges.query.cpu(), edges.node.cpu(), edges.weight.cpu(), 1)
    base = graph.edge_index[:, graph.edge_index[0] < graph.edge_index[1]]
    weights = graph.edge_weight[graph.edge_index[0] < graph.edge_index[1]].tolist()
    pairs = base.T.tolist()
    times = []
    for query in range(queries):
        pick = edges.query == query
        extra = [[int(graph.num_nodes), int(node)] for node in edges.node[pick]]
        g = igraph.Graph(n=int(graph.num_nodes) + 1, edges=pairs + extra)
        start = time.perf_counter()
        g.personalized_pagerank(
            damping=alpha,
            reset_vertices=[int(graph.num_nodes)],
            weights=weights + edges.weight[pick].tolist(),
        )
        times.append(time.perf_counter() - start)
    return times


def percentiles(times: list[float]) -> dict[str, float]:
    """p50 and p95 in milliseconds."""
    return {"p50_ms": 1e3 * float(np.percentile(times, 50)), "p95_ms": 1e3 * float(np.percentile(times, 95))}


def one_size(args: argparse.Namespace, size: int) -> dict:
    """Every measurement of one pool size (run in its own process)."""
    from graphctx.retrieval.graph import build_question_graph, degree_stats, query_edges
    from graphctx.retrieval.knn import build_knn_graph, edge_recall
    from graphctx.retrieval.pagerank import PoolPageRank
    from graphctx.retrieval.push import PoolPush

    torch.set_num_threads(1)
    pool = clustered(size, args.dim, args.clusters, args.spread, seed=0).to(args.device)
    queries = clustered(args.queries, args.dim, args.clusters, args.spread, seed=1).to(args.device)
    row: dict = {"size": size, "device": args.device}
    start = time.perf_counter()
    graph = build_knn_graph(pool, args.threshold, args.knn_k)
    row["knn_build_s"] = time.perf_counter() - start
    row["edge_recall"] = edge_recall(graph, pool, args.threshold, args.recall_sample)
    row["mean_degree"] = degree_stats(graph)["mean_degree"]
    edges = query_edges(queries, pool, args.threshold)
    row["linked_queries"] = int(torch.unique(edges.query).numel())
    push_times, push_ids = latencies(PoolPush(graph, eps=args.eps), edges, args.queries)
    row["push"] = percentiles(push_times)
    if size <= args.exact_max:
        start = time.perf_counter()
        exact = build_question_graph(pool, args.threshold)
        row["exact_build_s"] = time.perf_counter() - start
        power_times, power_ids = latencies(PoolPageRank(graph), edges, args.queries)
        row["power"] = percentiles(power_times)
        valid = power_ids >= 0
        agree = (push_ids == power_ids)[valid]
        row["agreement_top10"] = float(agree.float().mean()) if len(agree) else None
        row["exact_edges"] = exact.edge_index.shape[1] // 2
    row["igraph"] = percentiles(igraph_latency(graph, edges, min(args.queries, 20), 0.85))
    if args.device.startswith("cuda"):
        row["peak_gpu_gib"] = torch.cuda.max_memory_allocated() / 2**30
    row["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000, 300_000, 1_000_000])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (Faiss GPU index, push in torch)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--clusters", type=int, default=2000)
    parser.add_argument("--spread", type=float, default=0.4)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--knn-k", type=int, default=64)
    parser.add_argument("--eps", type=float, default=1e-4)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--recall-sample", type=int, default=500)
    parser.add_argument("--exact-max", type=int, default=100_000)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_size(args, args.one)))
        return
    rows, forwarded, skipping = [], [], False
    for arg in sys.argv[1:]:  # every option but --sizes and its values
        skipping = arg == "--sizes" or (skipping and not arg.startswith("--"))
        forwarded += [] if skipping else [arg]
    for size in args.sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(size), *forwarded],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), file=sys.stderr)
    print(json.dumps({"benchmark": "retrieval_scale", "threads": 1, "sizes": rows}))


if __name__ == "__main__":
    main()
