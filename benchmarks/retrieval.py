"""Personalized PageRank retrieval: networkx per query (the paper) vs igraph/prpack per query (HippoRAG) vs
graphctx batched, on one pool graph and one query set.

    python benchmarks/retrieval.py --pool 20000 --queries 2000 --device cpu
    python benchmarks/retrieval.py --pool 1000000 --dim 1024 --clusters 2000 --queries 10000 \
        --device cuda --peer-queries 0

Embeddings are clustered synthetic unit vectors (each point is its cluster centre plus noise of a
per-point scale, so degrees range from isolated to dense hubs); with ``--real`` they are the packaged
MiniLM's embeddings of the real cardano questions (all splits, no token filter; pool + queries must fit;
MiniLM's cosines are lower than bge's, so use ``--threshold 0.5`` there). ``--max-neighbors`` caps the
graph as ``retrieval.max_neighbors`` does.

A query with no edge above the threshold costs graphctx nothing (it has nothing to rank), so the figure
over all queries flatters it. The peers (networkx, igraph) run on one random sample of ``--peer-queries``
LINKED queries, the same sample for both; graphctx is timed on all linked queries alone
(``graphctx_ms_per_linked_query``, what ``speedup`` uses), on exactly the peers' sample
(``graphctx_ms_per_sample_query``, ``speedup_same_queries``) and on all queries
(``graphctx_ms_per_query``, ``speedup_all_queries``).
``topk_agreement`` compares graphctx's top-k with networkx's on the sample, rank by rank, skipping ranks
whose networkx score is tied with a neighbour (relative gap < 1e-6) and ranks beyond the nodes reachable
from the query (networkx orders those by query-independent leftover mass). On the CPU everything runs on
one thread by default (``--threads``), as networkx and igraph do. All three rank from the same query edges;
computing those (one chunked product of queries × pool) is timed apart as ``query_edges_ms_per_query``.
Progress goes to stderr; the last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graphctx.retrieval.graph import build_question_graph, degree_stats, describe_degrees, query_edges
from graphctx.retrieval.pagerank import PoolPageRank, QueryEdges

ALPHA, MAX_ITER, TOL = 0.85, 100, 1e-6  # PageRank's (networkx's defaults, the paper's), for all three


def log(message: str) -> None:
    print(f"[retrieval-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def clustered_embeddings(
    count: int, dim: int, clusters: int, noise: tuple[float, float], seed: int, device: torch.device
) -> torch.Tensor:
    """Unit vectors ``normalise(centre + s·g/√dim)``: cluster sizes vary (lognormal weights), and the
    per-point noise ``s`` (uniform in ``noise``) sets how many neighbours a point has above the threshold."""
    generator = torch.Generator(device=device).manual_seed(seed)
    centres = torch.randn(clusters, dim, generator=generator, device=device)
    centres = torch.nn.functional.normalize(centres, dim=1)
    weights = torch.exp(torch.randn(clusters, generator=generator, device=device))
    members = torch.multinomial(weights, count, replacement=True, generator=generator)
    scale = torch.empty(count, 1, device=device).uniform_(*noise, generator=generator)
    embeddings = torch.empty(count, dim, device=device)
    for start in range(0, count, 65536):  # bounded temporary memory for a million points
        stop = min(start + 65536, count)
        noise_vectors = torch.randn(stop - start, dim, generator=generator, device=device) / math.sqrt(dim)
        points = centres[members[start:stop]] + scale[start:stop] * noise_vectors
        embeddings[start:stop] = torch.nn.functional.normalize(points, dim=1)
    return embeddings


def real_embeddings(pool: int, queries: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """MiniLM embeddings of real cardano questions (pool first, queries after)."""
    from graphctx.data import load_qa_dataset
    from graphctx.data.settings import DatasetSettings
    from graphctx.retrieval.embeddings import PACKAGED_MINILM, embed_texts

    cardano = Path(__file__).resolve().parents[2] / "shared" / "data" / "stackexchange" / "cardano"
    settings = DatasetSettings(source=str(cardano))
    dataset = load_qa_dataset(replace(settings, filters=replace(settings.filters, max_tokens=None)))
    texts = [text for split in dataset.values() for text in split["question"]]
    if pool + queries > len(texts):
        raise SystemExit(f"--real: only {len(texts)} questions, asked for {pool} + {queries}")
    embeddings = embed_texts(texts[: pool + queries], PACKAGED_MINILM, device=str(device)).to(device)
    return embeddings[:pool], embeddings[pool:]


def networkx_top(graph_nx, edges: list[list[tuple[int, float]]], sample: list[int], k: int):
    """The paper's way, per query: copy the graph, add the query node, networkx.pagerank."""
    import networkx as nx

    tops, start = {}, time.perf_counter()
    for query in sample:
        graph = graph_nx.copy()
        graph.add_node("q")
        graph.add_weighted_edges_from(("q", node, weight) for node, weight in edges[query])
        scores = nx.pagerank(graph, alpha=ALPHA, personalization={"q": 1}, max_iter=MAX_ITER, tol=TOL)
        reachable = nx.node_connected_component(graph, "q") - {"q"}
        ranked = sorted(reachable, key=lambda node: -scores[node])[: k + 1]
        tops[query] = [(node, scores[node]) for node in ranked]
    return tops, (time.perf_counter() - start) * 1000 / max(len(sample), 1)


def igraph_time(graph_data, edges: list[list[tuple[int, float]]], sample: list[int]) -> float:
    """HippoRAG's way, per query: add the query vertex, igraph personalized_pagerank (prpack), remove it."""
    import igraph

    num_nodes = int(graph_data.num_nodes)
    edge_index = graph_data.edge_index.cpu()
    keep = edge_index[0] < edge_index[1]
    graph = igraph.Graph(n=num_nodes, edges=edge_index[:, keep].T.tolist(), directed=False)
    graph.es["weight"] = graph_data.edge_weight.cpu()[keep].tolist()
    start = time.perf_counter()
    for query in sample:
        graph.add_vertices(1)
        graph.add_edges(
            [(num_nodes, node) for node, _ in edges[query]], {"weight": [w for _, w in edges[query]]}
        )
        graph.personalized_pagerank(
            directed=False,
            damping=ALPHA,
            reset_vertices=[num_nodes],
            weights="weight",
            implementation="prpack",
        )
        graph.delete_vertices(num_nodes)
    return (time.perf_counter() - start) * 1000 / max(len(sample), 1)


def agreement(ours: torch.Tensor, reference: dict[int, list[tuple[int, float]]], k: int) -> float | None:
    """Fraction of comparable ranks (untied, reachable) where graphctx and networkx pick the same node."""
    same = total = 0
    for query, ranked in reference.items():
        scores = [score for _, score in ranked]
        for rank in range(min(k, len(ranked))):
            neighbours = [scores[r] for r in (rank - 1, rank + 1) if 0 <= r < len(scores)]
            if any(abs(scores[rank] - other) <= 1e-6 * scores[rank] for other in neighbours):
                continue
            total += 1
            same += int(ours[query, rank].item() == ranked[rank][0])
    return same / total if total else None


def select_queries(edges: QueryEdges, chosen: torch.Tensor) -> QueryEdges:
    """The edges of queries ``chosen`` (a 1-D index tensor), renumbered 0..len(chosen)-1 in that order."""
    new_index = torch.full((edges.num_queries,), -1, dtype=torch.long, device=edges.query.device)
    new_index[chosen] = torch.arange(len(chosen), device=edges.query.device)
    keep = new_index[edges.query] >= 0
    return QueryEdges(new_index[edges.query[keep]], edges.node[keep], edges.weight[keep], len(chosen))


def timed_run(ranker: PoolPageRank, edges: QueryEdges, k: int, device: torch.device) -> tuple[float, object]:
    """graphctx's batched PageRank over ``edges``: (ms per query, result)."""
    synchronize(device)
    start = time.perf_counter()
    result = ranker.rank(edges, k)
    synchronize(device)
    return (time.perf_counter() - start) * 1000 / max(edges.num_queries, 1), result


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    return numerator / denominator if numerator and denominator else None


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pool", type=int, default=20000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dim", type=int, default=256, help="synthetic embedding width")
    parser.add_argument("--clusters", type=int, default=None, help="synthetic clusters (default pool/10)")
    parser.add_argument("--noise", type=float, nargs=2, default=(0.43, 0.8), help="per-point noise range")
    parser.add_argument("--real", action="store_true", help="MiniLM embeddings of real cardano questions")
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--max-neighbors", type=int, help="retrieval.max_neighbors (default: no cap)")
    parser.add_argument("--top-k", type=int, default=2)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--chunk-size", type=int, default=4096)
    parser.add_argument("--batch-slots", type=int, default=None, help="max_batch_slots (default per device)")
    parser.add_argument(
        "--peer-queries", type=int, default=60, help="linked queries networkx and igraph run (0 skips both)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1: like the single-threaded baselines)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    device = torch.device(args.device)
    graph_options = {"max_neighbors": args.max_neighbors, "chunk_size": args.chunk_size}
    log(f"embeddings: pool {args.pool}, queries {args.queries}, device {device}")
    if args.real:
        pool, queries = real_embeddings(args.pool, args.queries, device)
    else:
        clusters = args.clusters or max(1, args.pool // 10)
        both = clustered_embeddings(
            args.pool + args.queries, args.dim, clusters, args.noise, args.seed, device
        )
        pool, queries = both[: args.pool], both[args.pool :]

    synchronize(device)
    start = time.perf_counter()
    graph = build_question_graph(pool, args.threshold, **graph_options)
    ranker = PoolPageRank(
        graph,
        alpha=ALPHA,
        tol=TOL,
        max_iter=MAX_ITER,
        dtype=getattr(torch, args.dtype),
        max_batch_slots=args.batch_slots or (1 << 24 if device.type == "cpu" else 1 << 28),
        max_columns=args.queries,
    )
    synchronize(device)
    build_s = time.perf_counter() - start
    stats = degree_stats(graph)
    log(f"graph built in {build_s:.2f} s: {describe_degrees(stats)}")

    ranker.rank(query_edges(queries[:64], pool, args.threshold, **graph_options), args.top_k)  # warm-up
    synchronize(device)
    start = time.perf_counter()
    edges = query_edges(queries, pool, args.threshold, **graph_options)
    synchronize(device)
    edges_ms = (time.perf_counter() - start) * 1000 / args.queries
    graphctx_ms, result = timed_run(ranker, edges, args.top_k, device)
    linked_ids = result.linked.nonzero()[:, 0]
    linked_ms, _ = timed_run(ranker, select_queries(edges, linked_ids), args.top_k, device)
    log(
        f"graphctx: PPR {graphctx_ms:.4f} ms/query over all, {linked_ms:.4f} ms per linked query; "
        f"query edges {edges_ms:.4f} ms/query; {len(linked_ids)} of {args.queries} queries linked, "
        f"iterations {int(result.iterations.max())} max, converged {bool(result.converged.all())}"
    )

    rng = np.random.default_rng(args.seed)
    sample = rng.permutation(linked_ids.cpu().numpy())[: args.peer_queries].tolist()
    networkx_ms = igraph_ms = sample_ms = topk = None
    if sample:
        chosen = select_queries(edges, torch.tensor(sample, device=device))
        sample_ms, _ = timed_run(ranker, chosen, args.top_k, device)
        per_query: list[list[tuple[int, float]]] = [[] for _ in range(args.queries)]
        triples = zip(edges.query.tolist(), edges.node.tolist(), edges.weight.tolist(), strict=True)
        for query, node, weight in triples:
            per_query[query].append((node, weight))
        import networkx as nx

        graph_nx = nx.Graph()
        graph_nx.add_nodes_from(range(args.pool))
        edge_index, weight = graph.edge_index.cpu(), graph.edge_weight.cpu()
        keep = edge_index[0] < edge_index[1]
        graph_nx.add_weighted_edges_from(
            zip(*edge_index[:, keep].tolist(), weight[keep].double().tolist(), strict=True)
        )
        reference, networkx_ms = networkx_top(graph_nx, per_query, sample, args.top_k)
        topk = agreement(result.node_ids.cpu(), reference, args.top_k)
        log(f"networkx: {networkx_ms:.2f} ms/query on {len(sample)} linked queries; top-k agreement {topk}")
        try:
            igraph_ms = igraph_time(graph, per_query, sample)
            log(f"igraph/prpack: {igraph_ms:.3f} ms/query on the same {len(sample)} queries")
        except ImportError:
            log("igraph is not installed: its figure is null (pip install igraph)")

    figures = {
        "pool": args.pool,
        "queries": args.queries,
        "linked_queries": len(linked_ids),
        "peer_queries": len(sample),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "networkx_ms_per_query": networkx_ms,
        "igraph_ms_per_query": igraph_ms,
        "graphctx_ms_per_linked_query": linked_ms,
        "graphctx_ms_per_sample_query": sample_ms,
        "graphctx_ms_per_query": graphctx_ms,
        "speedup": ratio(networkx_ms, linked_ms),
        "speedup_vs_igraph": ratio(igraph_ms, linked_ms),
        "speedup_same_queries": ratio(networkx_ms, sample_ms),
        "speedup_vs_igraph_same_queries": ratio(igraph_ms, sample_ms),
        "speedup_all_queries": ratio(networkx_ms, graphctx_ms),
        "speedup_vs_igraph_all_queries": ratio(igraph_ms, graphctx_ms),
        "topk_agreement": topk,
        "build_s": build_s,
        "query_edges_ms_per_query": edges_ms,
        "build_plus_queries_s": build_s + args.queries * (edges_ms + graphctx_ms) / 1000,
        **{name: stats[name] for name in ("edges", "min_degree", "mean_degree", "median_degree")},
        **{name: stats[name] for name in ("max_degree", "isolated_share", "largest_component")},
        "max_neighbors": args.max_neighbors,
        "max_iterations": int(result.iterations.max()),
        "embeddings": "real" if args.real else f"synthetic-{args.dim}d",
        "cpu_threads": torch.get_num_threads(),
    }
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
