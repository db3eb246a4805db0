r"""The question-question graph: an undirected edge of weight :math:`\cos(u, v)` wherever it exceeds T.

Cosines come from chunked matrix products of L2-normalised embeddings (``chunk × pool`` at a time, never
``pool × pool``), so memory stays bounded on the CPU and the GPU alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import degree, to_undirected

from graphctx.cache import atomic_path
from graphctx.errors import ConfigError
from graphctx.retrieval.components import connected_components
from graphctx.retrieval.numerics import similarity_dtype
from graphctx.retrieval.pagerank import QueryEdges


def strict_threshold(threshold: float, dtype: torch.dtype) -> Tensor:
    """The value ``t`` of ``dtype`` such that ``x > t`` in ``dtype`` equals ``float(x) > threshold`` for every
    ``x`` of ``dtype`` (the largest ``dtype`` value not above ``threshold``), so products in bfloat16 need no
    float32 copy to be compared, and float32 cosines compare against the real threshold.

    Examples:
        >>> t = strict_threshold(0.8, torch.bfloat16)
        >>> float(t) <= 0.8 < float(torch.nextafter(t, torch.tensor(1.0, dtype=torch.bfloat16)))
        True
    """
    value = torch.tensor(threshold, dtype=torch.float64).to(dtype)
    if float(value) > threshold:
        value = torch.nextafter(value, torch.tensor(float("-inf"), dtype=dtype))
    return value


#: Bound on ``|bf16 product - exact cosine|`` for unit vectors, with room: rounding both inputs to bfloat16
#: moves a dot product by at most ``(2u + u²)·‖a‖‖b‖ ≈ 0.0079`` (``u = 2**-8``) and rounding the product
#: by at most ``2**-9``.
LOW_PRECISION_MARGIN = 0.02


def exact_dot(left: Tensor, right: Tensor, rows: Tensor, cols: Tensor, chunk: int = 1 << 18) -> Tensor:
    """``left[rows[i]] · right[cols[i]]`` in the inputs' own precision, ``chunk`` pairs at a time.

    Examples:
        >>> vectors = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
        >>> exact_dot(vectors, vectors, torch.tensor([0, 1]), torch.tensor([1, 1])).tolist()
        [0.6000000238418579, 1.0]
    """
    out = torch.empty(len(rows), dtype=left.dtype, device=left.device)
    for start in range(0, len(rows), chunk):
        pick = slice(start, start + chunk)
        out[pick] = torch.linalg.vecdot(left[rows[pick]], right[cols[pick]])
    return out


def similarity_edges(
    left: Tensor,
    right: Tensor,
    threshold: float,
    *,
    chunk_size: int = 4096,
    dtype: str | torch.dtype = "auto",
    upper_triangle: bool = False,
    rescore: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""All pairs ``(i, j)`` with :math:`\cos(l_i, r_j) > T` (``threshold``), as (rows, cols, cosines).

    Inputs L2-normalised; with ``upper_triangle`` (``left is right``) only ``j > i`` is kept. Products run
    ``chunk_size`` rows at a time (fewer if a block would pass 2**31 entries) in ``dtype`` (``auto``:
    bfloat16 on CUDA). When that is less precise than the inputs, they only propose candidates (cosine
    above ``T - LOW_PRECISION_MARGIN``), re-scored in the inputs' precision (:func:`exact_pairs_above`),
    so edges and weights equal a full-precision build's. ``rescore`` does that in every precision: each
    pair's cosine is then :func:`exact_dot`'s, the same bits whatever block it was found in (the pool
    graph's weights thus equal across builds of different pools,
    :mod:`~graphctx.retrieval.scale.incremental`).

    Examples:
        >>> unit = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
        >>> rows, cols, cosines = similarity_edges(unit, unit, 0.5, upper_triangle=True)
        >>> rows.tolist(), cols.tolist(), cosines.tolist()
        ([0, 1], [1, 2], [0.800000011920929, 0.6000000238418579])
    """
    dtype = similarity_dtype(dtype, left.device)
    left_cast, right_cast = left.to(dtype), right.to(dtype)
    refine = rescore or dtype.itemsize < left.dtype.itemsize
    margin = LOW_PRECISION_MARGIN if refine else 0.0
    candidate = strict_threshold(threshold - margin, dtype).to(left.device)
    # Keep each block under 2**31 entries (the limit of 32-bit indexing in some CUDA kernels, e.g. nonzero).
    step = max(1, min(chunk_size, (2**31 - 1) // max(len(right), 1)))
    pieces = []
    for start in range(0, len(left), step):
        stop = min(start + step, len(left))
        offset = start if upper_triangle else 0
        block = left_cast[start:stop] @ right_cast[offset:].T
        if upper_triangle:
            # Column c of the block is node offset + c; keep it only strictly right of the diagonal.
            block[:, : stop - start].triu_(diagonal=1)
        row, col = (block > candidate).nonzero(as_tuple=True)
        row, col = row + start, col + offset
        if refine:
            row, col, value = exact_pairs_above(left, right, row, col, threshold)
        else:
            value = block[row - start, col - offset]
        pieces.append((row, col, value.float()))
    if not pieces:
        empty = torch.zeros(0, dtype=torch.long, device=left.device)
        return empty, empty, torch.zeros(0, device=left.device)
    rows, cols, values = (torch.cat(part) for part in zip(*pieces, strict=True))
    return rows, cols, values


def exact_pairs_above(
    left: Tensor, right: Tensor, rows: Tensor, cols: Tensor, threshold: float
) -> tuple[Tensor, Tensor, Tensor]:
    """The candidate pairs whose cosine, recomputed in the inputs' precision (:func:`exact_dot`), is above
    ``threshold``: (rows, cols, cosines)."""
    value = exact_dot(left, right, rows, cols)
    keep = value > strict_threshold(threshold, value.dtype).to(left.device)
    return rows[keep], cols[keep], value[keep]


def check_max_neighbors(max_neighbors: int | None) -> int | None:
    """``max_neighbors`` if it is None or a positive integer; else a one-line ConfigError naming
    ``retrieval.max_neighbors``."""
    cap = max_neighbors
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise ConfigError(f"retrieval.max_neighbors={cap!r}: must be a positive integer or null (no cap)")
    return cap


def top_m_mask(source: Tensor, target: Tensor, weight: Tensor, m: int) -> Tensor:
    """Bool mask of the directed edges ``source -> target`` that are among ``source``'s ``m`` heaviest.

    Ties in weight go to the lower ``target`` index, so the choice does not depend on edge order.

    Examples:
        >>> source, target = torch.tensor([0, 0, 0, 1]), torch.tensor([1, 2, 3, 0])
        >>> top_m_mask(source, target, torch.tensor([0.9, 0.8, 0.9, 0.5]), m=2).tolist()
        [True, False, True, True]
    """
    if len(source) == 0:
        return torch.zeros(0, dtype=torch.bool, device=source.device)
    # three stable sorts = one lexicographic sort by (source, -weight, target)
    order = torch.argsort(target, stable=True)
    order = order[torch.argsort(weight[order], descending=True, stable=True)]
    order = order[torch.argsort(source[order], stable=True)]
    grouped = source[order]
    position = torch.arange(len(order), device=source.device)
    is_first = torch.ones_like(grouped, dtype=torch.bool)
    is_first[1:] = grouped[1:] != grouped[:-1]
    group_start = torch.cummax(torch.where(is_first, position, 0), dim=0).values
    keep = torch.zeros(len(order), dtype=torch.bool, device=source.device)
    keep[order] = position - group_start < m
    return keep


def cap_neighbors(rows: Tensor, cols: Tensor, weights: Tensor, m: int) -> tuple[Tensor, Tensor, Tensor]:
    r"""Undirected edges ``{i, j}`` (given once each) kept when :math:`j \in \mathrm{top}_m(i)` or
    :math:`i \in \mathrm{top}_m(j)`, where :math:`\mathrm{top}_m(v)` holds ``v``'s ``m`` most similar
    neighbours (the union keeps the graph symmetric; every node keeps at least ``min(m, degree)`` edges).

    Examples:
        >>> rows, cols = torch.tensor([0, 0, 1]), torch.tensor([1, 2, 2])
        >>> kept = cap_neighbors(rows, cols, torch.tensor([0.9, 0.85, 0.95]), m=1)
        >>> kept[0].tolist(), kept[1].tolist()
        ([0, 1], [1, 2])
    """
    count = len(rows)
    source, target = torch.cat([rows, cols]), torch.cat([cols, rows])
    chosen = top_m_mask(source, target, torch.cat([weights, weights]), m)
    keep = chosen[:count] | chosen[count:]
    return rows[keep], cols[keep], weights[keep]


def build_question_graph(
    embeddings: Tensor,
    threshold: float,
    *,
    max_neighbors: int | None = None,
    chunk_size: int = 4096,
    dtype: str | torch.dtype = "auto",
) -> Data:
    r"""The pool's question graph: an undirected edge :math:`\{i, j\}` of weight :math:`\cos(e_i, e_j)`
    wherever that exceeds ``threshold`` (:func:`similarity_edges`, re-scored by :func:`exact_dot`), capped
    at ``max_neighbors`` (:func:`cap_neighbors`) when that is set; a ``torch_geometric`` ``Data`` with both
    directions stored.

    Examples:
        >>> unit = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
        >>> build_question_graph(unit, 0.5).edge_index.tolist()
        [[0, 1, 1, 2], [1, 0, 2, 1]]
    """
    cap = check_max_neighbors(max_neighbors)
    rows, cols, weights = similarity_edges(
        embeddings,
        embeddings,
        threshold,
        chunk_size=chunk_size,
        dtype=dtype,
        upper_triangle=True,
        rescore=True,
    )
    if cap is not None:
        rows, cols, weights = cap_neighbors(rows, cols, weights, cap)
    edge_index, edge_weight = to_undirected(torch.stack([rows, cols]), weights, num_nodes=len(embeddings))
    return Data(edge_index=edge_index, edge_weight=edge_weight, num_nodes=len(embeddings))


def query_edges(
    queries: Tensor,
    pool: Tensor,
    threshold: float,
    *,
    max_neighbors: int | None = None,
    chunk_size: int = 4096,
    dtype: str | torch.dtype = "auto",
) -> QueryEdges:
    """Edges from each query to the pool questions whose cosine exceeds ``threshold`` (queries never link
    each other); with ``max_neighbors`` = m, each query keeps its m most similar pool questions.

    Examples:
        >>> pool = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0]])
        >>> edges = query_edges(torch.tensor([[0.0, 1.0], [-1.0, 0.0]]), pool, 0.5)
        >>> edges.query.tolist(), edges.node.tolist(), edges.num_queries
        ([0, 0], [1, 2], 2)
    """
    cap = check_max_neighbors(max_neighbors)
    rows, cols, weights = similarity_edges(queries, pool, threshold, chunk_size=chunk_size, dtype=dtype)
    if cap is not None:
        keep = top_m_mask(rows, cols, weights, cap)
        rows, cols, weights = rows[keep], cols[keep], weights[keep]
    return QueryEdges(query=rows, node=cols, weight=weights, num_queries=len(queries))


def degree_stats(graph: Data) -> dict[str, float]:
    """Edges, density (edges / possible pairs), min/mean/median/max degree, isolated nodes (count and
    share) and connected components.

    Examples:
        >>> path = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=4)
        >>> stats = degree_stats(path)
        >>> stats["edges"], stats["max_degree"], stats["isolated"], stats["components"]
        (2, 2, 1, 2)
    """
    num_nodes = int(graph.num_nodes)
    degrees = degree(graph.edge_index[0], num_nodes=num_nodes)
    components = connected_components(graph.edge_index, num_nodes)
    sizes = torch.bincount(components) if num_nodes else torch.zeros(1)
    return {
        "nodes": num_nodes,
        "edges": graph.edge_index.shape[1] // 2,
        "density": graph.edge_index.shape[1] / (num_nodes * (num_nodes - 1)) if num_nodes > 1 else 0.0,
        "min_degree": int(degrees.min()) if num_nodes else 0,
        "mean_degree": float(degrees.mean()) if num_nodes else 0.0,
        "median_degree": float(degrees.median()) if num_nodes else 0.0,
        "max_degree": int(degrees.max()) if num_nodes else 0,
        "isolated": int((degrees == 0).sum()),
        "isolated_share": float((degrees == 0).float().mean()) if num_nodes else 0.0,
        "components": len(sizes),
        "largest_component": int(sizes.max()),
    }


def linkage_stats(fallbacks: Sequence[Sequence[bool]], graph: Mapping[str, float] | None = None) -> dict:
    """How queries linked to the question graph, from each query's hits' ``fallback`` flags (as every
    prediction records them): ``queries``; ``no_edge``, those without any edge above T (every hit by
    cosine); ``topped_up``, those with edges that reached fewer than k pool questions (some hits by
    cosine); ``linked`` = queries - no_edge; the shares of each; and, given :func:`degree_stats` of the
    graph, its ``density`` and ``mean_degree``.

    Examples:
        >>> stats = linkage_stats([[False, False], [True, True], [False, True]])
        >>> stats["linked"], stats["no_edge"], stats["topped_up"]
        (2, 1, 1)
    """
    queries = len(fallbacks)
    no_edge = sum(bool(flags) and all(flags) for flags in fallbacks)
    topped_up = sum(any(flags) and not all(flags) for flags in fallbacks)
    stats: dict[str, float] = {"queries": queries, "linked": queries - no_edge, "no_edge": no_edge}
    stats["topped_up"] = topped_up
    for name in ("linked", "no_edge", "topped_up"):
        stats[f"{name}_share"] = stats[name] / queries if queries else 0.0
    if graph is not None:
        stats["density"], stats["mean_degree"] = graph["density"], graph["mean_degree"]
    return stats


def describe_linkage(stats: Mapping[str, float]) -> str:
    """One line of :func:`linkage_stats`."""
    line = (
        f"{stats['linked']} of {stats['queries']} queries ({100 * stats['linked_share']:.1f}%) link to the "
        f"graph; {stats['no_edge']} with no edge above T (all hits by cosine), {stats['topped_up']} topped "
        "up by cosine (fewer than k pool questions reached)"
    )
    if "density" in stats:
        line += f"; graph density {stats['density']:.2e}, mean degree {stats['mean_degree']:.1f}"
    return line


def graph_fallbacks(graph: Data, edges: QueryEdges, top_k: int) -> list[list[bool]]:
    """The ``fallback`` flags :class:`~graphctx.retrieval.retriever.GraphRetriever` gives each query,
    without running PageRank: a query's graph hits are the ``min(k, reach)`` best of the pool nodes in the
    components its edges touch (``reach`` of them); the rest of its k hits are cosine's.

    Examples:
        >>> path = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=3)
        >>> edges = QueryEdges(torch.tensor([0, 1]), torch.tensor([0, 2]), torch.ones(2), num_queries=3)
        >>> graph_fallbacks(path, edges, top_k=2)
        [[False, False], [False, True], [True, True]]
    """
    num_nodes = int(graph.num_nodes)
    components = connected_components(graph.edge_index, num_nodes)
    sizes = torch.bincount(components, minlength=1)
    count = len(sizes)
    touched = torch.unique(edges.query * count + components[edges.node])
    reach = torch.zeros(edges.num_queries, dtype=torch.long, device=sizes.device)
    reach.index_add_(0, touched // count, sizes[touched % count])
    k = min(top_k, num_nodes)
    return [[False] * hits + [True] * (k - hits) for hits in reach.clamp(max=k).tolist()]


DENSE_MEAN_DEGREE = 50.0
"""Mean degree above which :func:`density_warning` speaks: PageRank's cost grows with the edges and a few
hub questions start to dominate every query's ranking."""


def describe_degrees(stats: dict[str, float]) -> str:
    """One line of :func:`degree_stats`: min/mean/median/max degree and the isolated share."""
    degrees = (
        f"degree min {stats['min_degree']}, mean {stats['mean_degree']:.1f}, "
        f"median {stats['median_degree']:.0f}, max {stats['max_degree']}"
    )
    isolated = f"isolated {stats['isolated']} of {stats['nodes']} ({100 * stats['isolated_share']:.1f}%)"
    return f"{degrees}; {isolated}; {stats['edges']} edges"


def density_warning(stats: dict[str, float], threshold: float) -> str | None:
    """A warning when the graph (:func:`degree_stats`, built at ``threshold``) has no edge, or a mean degree
    above :data:`DENSE_MEAN_DEGREE`; else None.

    Examples:
        >>> lonely = {"nodes": 3, "edges": 0, "mean_degree": 0.0, "max_degree": 0}
        >>> density_warning(lonely, threshold=0.8)[:40]
        'warning: the question graph has no edge:'
    """
    if stats["edges"] == 0 and stats["nodes"] > 1:
        return (
            f"warning: the question graph has no edge: no two of its {stats['nodes']} questions have a "
            f"cosine above retrieval.threshold={threshold}, so PageRank reaches only a query's "
            "direct neighbours and graph retrieval is little more than dense ranking; lower "
            "retrieval.threshold"
        )
    if stats["mean_degree"] <= DENSE_MEAN_DEGREE:
        return None
    mean, limit = stats["mean_degree"], DENSE_MEAN_DEGREE
    return (
        f"warning: the question graph is dense (mean degree {mean:.1f} > {limit:g} at "
        f"retrieval.threshold={threshold}, max degree {stats['max_degree']}): PageRank slows "
        "with the edges and hubs crowd the rankings; set retrieval.max_neighbors (e.g. 20) or raise "
        "retrieval.threshold"
    )


def save_graph(graph: Data, path: str | os.PathLike[str]) -> None:
    """Write the graph atomically (``torch.save`` of its edge tensors and node count)."""
    payload = {
        "edge_index": graph.edge_index.cpu(),
        "edge_weight": graph.edge_weight.cpu(),
        "num_nodes": int(graph.num_nodes),
    }
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_graph(path: str | os.PathLike[str], device: str | torch.device = "cpu") -> Data:
    """Read a graph written by :func:`save_graph`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"question graph not found: {path}")
    payload = torch.load(path, map_location=device, weights_only=True)
    missing = {"edge_index", "edge_weight", "num_nodes"} - set(payload)
    if missing:
        raise ValueError(f"{path} is not a graphctx question graph: missing {sorted(missing)}")
    return Data(**payload)
