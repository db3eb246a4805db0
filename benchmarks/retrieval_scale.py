"""Retrieval at scale: exact vs k-NN (Faiss IVF) graph build, power iteration vs forward push, with igraph's
personalized_pagerank and PyG's ``get_ppr`` on the same graph and queries.

    nice python benchmarks/retrieval_scale.py --sizes 20000 100000 300000 1000000

Pools are synthetic clustered unit embeddings (dim 384, seeded; one centre per ``--per-cluster`` points,
so the mean degree stays about 10 at every size; per-point noise ``--spread``); queries are fresh points of
the same clusters linked by the graph's own rule. Each size runs in a fresh subprocess (this script with
``--one N``). Peak RSS: sampled every 5 ms during each build (``*_peak_rss_gib``: the whole process then,
pool embeddings included) and ``resource`` maxrss of the size's process. Builds use every core (Faiss's
OpenMP, torch's threads); PageRank latency is per query, one query at a time, on one thread (push's
``batch_ms_per_query``: all queries in one call, also one thread). The exact build runs up to
``--exact-max`` nodes, igraph and get_ppr up to ``--peer-max`` on ``--peer-queries`` queries.
``agreement_top10``: share of the reference top-10 slots (power iteration in float64 to tol 1e-12 on the
same graph) that a method fills with the same node; ``agreement_top10_vs_exact_graph``: push on the knn
graph against that reference on the exact graph. get_ppr reads no edge weights (unweighted push), so its
agreement is low by construction; its single-query time includes the CSR it builds per call.
``edge_recall``: above-T edges of ``--recall-sample`` seeded nodes that the knn graph has. Prints ONE JSON
line; the figures are in docs/scale.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import numpy as np
import torch

REFERENCE_TOL = 1e-12
"""Power iteration's tolerance (float64) for the reference top-10 that push, igraph and get_ppr are scored
against: the default float32 at networkx's 1e-6 itself moves near-tied neighbours."""


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
        result = ranker.rank(one, k)
        if result.node_ids.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        ids.append(result.node_ids[0])
    return times, torch.stack(ids)


def igraph_run(graph, edges, queries: int, alpha: float, k: int = 10) -> tuple[list[float], torch.Tensor]:
    """Per-query seconds of igraph's personalized_pagerank (PRPACK) on the graph plus the query node (its
    edges added to one igraph graph before the clock starts, removed after), and the top-k ids."""
    import igraph

    n = int(graph.num_nodes)
    upper = graph.edge_index[0] < graph.edge_index[1]
    g = igraph.Graph(n=n + 1, edges=graph.edge_index[:, upper].T.numpy())
    g.es["weight"] = graph.edge_weight[upper].double().numpy()
    base = g.ecount()
    times, ids = [], []
    for query in range(queries):
        pick = edges.query == query
        g.add_edges([(n, int(node)) for node in edges.node[pick]])
        g.es[base:]["weight"] = edges.weight[pick].tolist()
        start = time.perf_counter()
        scores = g.personalized_pagerank(damping=alpha, reset_vertices=[n], weights="weight")
        times.append(time.perf_counter() - start)
        g.delete_edges(range(base, g.ecount()))
        ids.append(top_ids(torch.tensor(scores[:n]), k))
    return times, torch.stack(ids)


def get_ppr_run(graph, edges, queries: int, alpha: float, eps: float, k: int = 10):
    """PyG's ``get_ppr`` (its numba forward push, unweighted: it reads only ``edge_index``) on the pool plus
    every query node: per-query seconds of one-target calls (its public API, which builds the CSR each
    call), seconds per query of one call for all ``queries`` targets, and the top-k ids."""
    from torch_geometric.utils import get_ppr

    n = int(graph.num_nodes)
    query_links = torch.stack([edges.query + n, edges.node])
    edge_index = torch.cat([graph.edge_index, query_links, query_links.flip(0)], dim=1)

    def call(targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return get_ppr(edge_index, 1 - alpha, eps, targets + n, num_nodes=n + edges.num_queries)

    call(torch.tensor([0]))  # compiles: not timed
    times, ids = [], []
    for query in range(queries):
        start = time.perf_counter()
        pairs, weight = call(torch.tensor([query]))
        times.append(time.perf_counter() - start)
        scores = torch.zeros(n, dtype=torch.float64)
        pool = pairs[1] < n
        scores[pairs[1][pool]] = weight[pool].double()
        ids.append(top_ids(scores, k))
    start = time.perf_counter()
    call(torch.arange(queries))
    return times, (time.perf_counter() - start) / queries, torch.stack(ids)


def top_ids(scores: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` best-scored nodes (stable order), -1 where fewer than ``k`` score above 0."""
    order = torch.argsort(scores, descending=True, stable=True)[:k]
    return torch.where(scores[order] > 0, order, -1)


def agreement(ids: torch.Tensor, reference: torch.Tensor) -> float | None:
    """Share of ``reference``'s ranked slots (not -1) that ``ids`` fills with the same node."""
    valid = reference >= 0
    return float((ids == reference)[valid].float().mean()) if bool(valid.any()) else None


class PeakRss:
    """Largest resident set size of this process (GiB) while the block runs, sampled every 5 ms from
    ``/proc/self/statm``."""

    def __enter__(self) -> PeakRss:
        self.gib, self._stop = 0.0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while True:
            with open("/proc/self/statm") as statm:
                self.gib = max(self.gib, int(statm.read().split()[1]) * page / 2**30)
            if self._stop.wait(0.005):
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def percentiles(times: list[float]) -> dict[str, float]:
    """p50 and p95 in milliseconds."""
    return {"p50_ms": 1e3 * float(np.percentile(times, 50)), "p95_ms": 1e3 * float(np.percentile(times, 95))}


def one_size(args: argparse.Namespace, size: int) -> dict:
    """Every measurement of one pool size (run in its own process)."""
    from graphctx.retrieval.graph import build_question_graph, degree_stats, query_edges
    from graphctx.retrieval.pagerank import PoolPageRank
    from graphctx.retrieval.scale.knn import build_knn_graph, edge_recall
    from graphctx.retrieval.scale.push import PoolPush
    from graphctx.retrieval.scale.push_frontier import FrontierPush

    torch.set_num_threads(1)
    clusters = max(1, size // args.per_cluster)
    pool = clustered(size, args.dim, clusters, args.spread, seed=0).to(args.device)
    queries = clustered(args.queries, args.dim, clusters, args.spread, seed=1).to(args.device)
    row: dict = {"size": size, "device": args.device, "eps": args.eps}
    with PeakRss() as rss:
        start = time.perf_counter()
        with torch_threads(args.build_threads):
            graph = build_knn_graph(pool, args.threshold, args.knn_k, nprobe=args.nprobe)
        row["knn_build_s"] = time.perf_counter() - start
    row["knn_peak_rss_gib"] = rss.gib
    row["edge_recall"] = edge_recall(graph, pool, args.threshold, args.recall_sample)
    row["mean_degree"] = degree_stats(graph)["mean_degree"]
    edges = query_edges(queries, pool, args.threshold)
    row["linked_queries"] = int(torch.unique(edges.query).numel())
    graph_cpu = graph.cpu()
    edges_cpu = type(edges)(edges.query.cpu(), edges.node.cpu(), edges.weight.cpu(), edges.num_queries)
    push = PoolPush(graph_cpu, eps=args.eps)
    push.rank(edges_cpu, 10)  # compiles (or loads) the numba loops
    push_times, push_ids = latencies(push, edges_cpu, args.queries)
    start = time.perf_counter()
    push.rank(edges_cpu, 10)
    batch = 1e3 * (time.perf_counter() - start) / args.queries
    row["push"] = {**percentiles(push_times), "batch_ms_per_query": batch}
    if args.device.startswith("cuda"):
        start = time.perf_counter()
        FrontierPush(graph, eps=args.eps).rank(edges, 10)
        torch.cuda.synchronize()
        row["push_gpu_batch_ms_per_query"] = 1e3 * (time.perf_counter() - start) / args.queries
    power_times, _ = latencies(PoolPageRank(graph), edges, args.queries)
    row["power"] = percentiles(power_times)
    reference = PoolPageRank(graph, dtype=torch.float64, tol=REFERENCE_TOL, max_iter=1000)
    reference_ids = reference.rank(edges, 10).node_ids.cpu()
    row["agreement_top10"] = agreement(push_ids, reference_ids)
    if size <= args.exact_max:
        with PeakRss() as rss:
            start = time.perf_counter()
            with torch_threads(args.build_threads):
                exact = build_question_graph(pool, args.threshold)
            row["exact_build_s"] = time.perf_counter() - start
        row["exact_peak_rss_gib"] = rss.gib
        row["exact_edges"] = exact.edge_index.shape[1] // 2
        exact_power = PoolPageRank(exact, dtype=torch.float64, tol=REFERENCE_TOL, max_iter=1000)
        exact_ids = exact_power.rank(edges, 10).node_ids.cpu()
        row["agreement_top10_vs_exact_graph"] = agreement(push_ids, exact_ids)
    peers = min(args.queries, args.peer_queries) if size <= args.peer_max else 0
    if not peers:
        return finish(row, args)
    igraph_times, igraph_ids = igraph_run(graph_cpu, edges_cpu, peers, 0.85)
    row["igraph"] = {
        **percentiles(igraph_times),
        "agreement_top10": agreement(igraph_ids, reference_ids[:peers]),
    }
    ppr_times, ppr_batch, ppr_ids = get_ppr_run(graph_cpu, edges_cpu, peers, 0.85, args.eps)
    row["get_ppr"] = {
        **percentiles(ppr_times),
        "batch_ms_per_query": 1e3 * ppr_batch,
        "agreement_top10": agreement(ppr_ids, reference_ids[:peers]),
    }
    return finish(row, args)


def finish(row: dict, args: argparse.Namespace) -> dict:
    """``row`` with the size process's peak memory."""
    if args.device.startswith("cuda"):
        row["peak_gpu_gib"] = torch.cuda.max_memory_allocated() / 2**30
    row["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return row


@contextmanager
def torch_threads(count: int):
    """torch's intra-op threads set to ``count`` for the block (graph builds; PageRank timing runs on 1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000, 300_000, 1_000_000])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (Faiss GPU index, push in torch)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--per-cluster", type=int, default=10, help="pool points per cluster centre")
    parser.add_argument("--spread", type=float, default=0.4)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--knn-k", type=int, default=64)
    parser.add_argument(
        "--nprobe", type=int, default=8, help="IVF cells searched (retrieval.scale.knn_nprobe)"
    )
    parser.add_argument("--eps", type=float, default=1e-6, help="push tolerance (ours and get_ppr's)")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--recall-sample", type=int, default=500)
    parser.add_argument("--exact-max", type=int, default=300_000)
    parser.add_argument("--peer-queries", type=int, default=20, help="queries timed for igraph and get_ppr")
    parser.add_argument(
        "--peer-max", type=int, default=1_000_000, help="largest pool igraph and get_ppr run on"
    )
    parser.add_argument("--build-threads", type=int, default=os.cpu_count(), help="torch threads of builds")
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
