r"""Incremental index: new questions added to a cached pool index without rebuilding it.

The union pool is the old pool followed by the new questions (the order a rebuild on ``old + new``, or a
dataset with the new rows appended, uses), so old node ``i`` keeps its index and new question ``j`` becomes
``N + j``. Only the new questions are embedded. New edges are the pairs above T between new and old
questions (rows old, as the rebuild's blocks find them) and among the new ones; every weight is
:func:`~graphctx.retrieval.graph.exact_dot`'s (``rescore``), the same bits a rebuild computes.

Exact build: the result *is* the rebuild's graph, edges and weights. With ``max_neighbors`` = m too:
adding nodes only adds candidates to each node's :math:`\mathrm{top}_m`, so an old pair the old cap dropped
(:math:`j \notin \mathrm{top}_m(i)`, :math:`i \notin \mathrm{top}_m(j)`) is dropped again, and every old
:math:`\mathrm{top}_m` is in the cached graph; capping (kept old edges ∪ new edges) therefore equals
capping all pairs of the union (:func:`~graphctx.retrieval.graph.cap_neighbors`, ties as in the rebuild).

k-NN build: the old part keeps its approximate edges and the new questions get *all* their above-T pairs,
so the union is still a subgraph of the exact graph with an above-T edge recall at least the old one on
old nodes and 1 on new ones; the stats record the recall re-measured on the union.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from graphctx.cache import cache_root, read_entry
from graphctx.errors import DataError
from graphctx.retrieval.builders import build_embeddings, build_stats_extra
from graphctx.retrieval.graph import cap_neighbors, check_max_neighbors, degree_stats, similarity_edges
from graphctx.retrieval.index import RetrievalIndex, index_key
from graphctx.retrieval.numerics import pinned_threads, resolve_device
from graphctx.retrieval.settings import RetrievalSettings


def check_additions(
    old_ids: Sequence[int], old_texts: Sequence[str], ids: Sequence[int], texts: Sequence[str]
) -> None:
    """A one-line :class:`DataError` when there is nothing to add, an added id is already in the pool or
    repeats among the added, or an added text is already a pool question's."""
    if not ids:
        raise DataError("--add: no new questions")
    pool, seen = set(map(int, old_ids)), set()
    for qid in map(int, ids):
        if qid in pool or qid in seen:
            raise DataError(f"--add: question id {qid} is already in the pool")
        seen.add(qid)
    known = set(old_texts)
    for qid, text in zip(ids, texts, strict=True):
        if text in known:
            raise DataError(f"--add: question {qid} has the text of a pool question")


def extend_graph(graph: Data, old: Tensor, new: Tensor, settings: RetrievalSettings) -> Data:
    """The question graph of the embeddings ``old ⊕ new`` from ``graph`` (that of ``old``): the pairs above
    T with a new question added, re-capped at ``max_neighbors`` (see the module)."""
    cap = check_max_neighbors(settings.max_neighbors)
    count = len(old)
    options = {
        "chunk_size": settings.similarity_chunk_size,
        "dtype": settings.similarity_dtype,
        "rescore": True,
    }
    cross = similarity_edges(old, new, settings.threshold, **options)
    inner = similarity_edges(new, new, settings.threshold, upper_triangle=True, **options)
    source, target = graph.edge_index
    upper = source < target
    rows = torch.cat([source[upper], cross[0], inner[0] + count])
    cols = torch.cat([target[upper], cross[1] + count, inner[1] + count])
    weights = torch.cat([graph.edge_weight[upper], cross[2], inner[2]])
    if cap is not None:
        rows, cols, weights = cap_neighbors(rows, cols, weights, cap)
    total = count + len(new)
    edge_index, edge_weight = to_undirected(torch.stack([rows, cols]), weights, num_nodes=total)
    return Data(edge_index=edge_index, edge_weight=edge_weight, num_nodes=total)


def extend_index(
    old_ids: Sequence[int],
    old_texts: Sequence[str],
    ids: Sequence[int],
    texts: Sequence[str],
    settings: RetrievalSettings,
    cache_dir: str | os.PathLike[str] | None = None,
) -> RetrievalIndex:
    """The index of the pool ``old + new``, written atomically to the cache entry a rebuild on that union
    uses (:func:`~graphctx.retrieval.index.index_key`; an entry already there is returned). The cached index
    of the old pool must exist and is left as it is. Only the new questions are embedded."""
    check_additions(old_ids, old_texts, ids, texts)
    union_ids, union_texts = [*map(int, old_ids), *map(int, ids)], [*old_texts, *texts]
    root = cache_root(cache_dir) / "retrieval-index"
    target = root / index_key(union_ids, union_texts, settings)
    cached = read_entry(target, RetrievalIndex.load)
    if cached is not None:
        return cached
    source = root / index_key(old_ids, old_texts, settings)
    old = read_entry(source, RetrievalIndex.load)
    if old is None:
        raise DataError(f"--add: no cached index of the pool in {source}; run graphctx index first")
    device = resolve_device(settings.device)
    new = build_embeddings(texts, settings, cache_dir=cache_dir)
    with pinned_threads(settings.cpu_threads, device):
        graph = extend_graph(old.graph.to(device), old.embeddings.to(device), new.to(device), settings)
    graph = graph.cpu()
    embeddings = torch.cat([old.embeddings, new])
    index = RetrievalIndex(torch.tensor(union_ids, dtype=torch.long), embeddings, graph, {})
    index.stats = {**degree_stats(graph), **build_stats_extra(graph, embeddings, settings)}
    index.save(target)
    return index
