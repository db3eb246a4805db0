r"""Edits and deletions of a cached pool index without a rebuild (additions: :mod:`.incremental`).

A pool update maps the old pool to the new one: old node ``i`` goes to new node ``kept[i]`` with its
embedding unchanged, or is gone (``-1``: deleted, or edited and so re-embedded); the *fresh* nodes (edited
or added) carry new embeddings. Only the fresh questions are embedded.

The new graph is rebuilt around the *dirty* nodes :math:`D`: the fresh ones and, with ``max_neighbors``
set, every surviving neighbour of a node that went. Candidates are the cached edges between two clean
nodes, and every pair above T with an end in :math:`D` (weights by
:func:`~graphctx.retrieval.graph.exact_dot`, the bits a rebuild computes).

Exact build: the result is the rebuild's graph. Without a cap the above-T pairs among the surviving nodes
are unchanged (a pair's cosine depends on its two ends alone), so only the fresh nodes' pairs are computed
and a deletion computes none: it costs the edge filtering, less than an add's one similarity row. With
``max_neighbors`` = m, a neighbour of a node that went may now take into its :math:`\mathrm{top}_m` a pair
the cap dropped, so it is dirty; a clean node :math:`c` had no edge to a node that went, so that node was
not in :math:`\mathrm{top}_m(c)`; :math:`c`'s new :math:`\mathrm{top}_m` is then drawn from its old one
(all kept edges) and its pairs with fresh nodes (all computed), so capping the candidates equals capping
all pairs of the new pool (:func:`~graphctx.retrieval.graph.cap_neighbors`).

k-NN build: the surviving part keeps its approximate edges (less those to nodes that went, which the exact
graph loses too) and the fresh nodes get all their above-T pairs, so the graph stays a subgraph of the
exact one, exact around every fresh node.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

from graphctx.cache import cache_root, read_entry
from graphctx.errors import DataError
from graphctx.retrieval.builders import build_embeddings, build_stats_extra
from graphctx.retrieval.encoder import SentenceEncoder
from graphctx.retrieval.graph import cap_neighbors, check_max_neighbors, degree_stats, similarity_edges
from graphctx.retrieval.index import RetrievalIndex, index_key
from graphctx.retrieval.numerics import pinned_threads, resolve_device
from graphctx.retrieval.settings import RetrievalSettings


def dirty_nodes(graph: Data, kept: Tensor, fresh: Tensor, capped: bool) -> Tensor:
    """New indices of the nodes whose edges are recomputed: ``fresh`` and, when the graph is ``capped``
    (``max_neighbors``), the surviving neighbours (in ``graph``, the old pool's) of every old node that went
    (``kept == -1``); see the module for why an uncapped graph needs no more than ``fresh``."""
    if not capped:
        return torch.unique(fresh)
    source, target = graph.edge_index
    gone = kept < 0
    touched = target[gone[source]]
    survivors = kept[touched]
    return torch.unique(torch.cat([fresh, survivors[survivors >= 0]]))


def update_graph(
    graph: Data, kept: Tensor, embeddings: Tensor, fresh: Tensor, settings: RetrievalSettings
) -> Data:
    """The question graph of the new pool's ``embeddings`` from ``graph`` (the old pool's), where old node
    ``i`` is new node ``kept[i]`` (``-1``: gone) and ``fresh`` are the new indices of edited or added nodes
    (see the module)."""
    cap = check_max_neighbors(settings.max_neighbors)
    total = len(embeddings)
    dirty = dirty_nodes(graph, kept, fresh, capped=cap is not None)
    is_dirty = torch.zeros(total, dtype=torch.bool, device=embeddings.device)
    is_dirty[dirty] = True
    source, target = kept[graph.edge_index[0]], kept[graph.edge_index[1]]
    clean = (source >= 0) & (target >= 0) & (source < target)
    clean &= ~is_dirty[source.clamp(min=0)] & ~is_dirty[target.clamp(min=0)]
    options = {
        "chunk_size": settings.similarity_chunk_size,
        "dtype": settings.similarity_dtype,
        "rescore": True,
    }
    rows, cols, weights = similarity_edges(embeddings[dirty], embeddings, settings.threshold, **options)
    rows = dirty[rows]
    once = (rows != cols) & ~(is_dirty[cols] & (cols < rows))  # a pair of two dirty nodes counted once
    rows, cols, weights = rows[once], cols[once], weights[once]
    low, high = torch.minimum(rows, cols), torch.maximum(rows, cols)
    rows = torch.cat([source[clean], low])
    cols = torch.cat([target[clean], high])
    weights = torch.cat([graph.edge_weight[clean], weights])
    if cap is not None:
        rows, cols, weights = cap_neighbors(rows, cols, weights, cap)
    edge_index, edge_weight = to_undirected(torch.stack([rows, cols]), weights, num_nodes=total)
    return Data(edge_index=edge_index, edge_weight=edge_weight, num_nodes=total)


@dataclass(frozen=True)
class PoolUpdate:
    """One batch of changes to a pool: ids to delete, ids to give a new text, and new (id, text) rows."""

    deleted: tuple[int, ...] = ()
    edited: tuple[tuple[int, str], ...] = ()
    added: tuple[tuple[int, str], ...] = ()

    def check(self, ids: Sequence[int]) -> None:
        """A one-line :class:`DataError` for an update that names an unknown id, adds a known one, names an
        id twice, or gives an empty text."""
        pool = set(map(int, ids))
        named = [*self.deleted, *(qid for qid, _ in self.edited), *(qid for qid, _ in self.added)]
        if not named:
            raise DataError("pool update: no question to add, edit or delete")
        repeated = sorted({qid for qid in named if named.count(qid) > 1})
        if repeated:
            raise DataError(f"pool update: question id {repeated[0]} is named twice")
        for qid in [*self.deleted, *(qid for qid, _ in self.edited)]:
            if qid not in pool:
                raise DataError(f"pool update: question id {qid} is not in the pool")
        for qid, _ in self.added:
            if qid in pool:
                raise DataError(f"pool update: question id {qid} is already in the pool")
        for qid, text in [*self.edited, *self.added]:
            if not text.strip():
                raise DataError(f"pool update: question {qid} has an empty text")

    def apply(self, ids: Sequence[int], texts: Sequence[str]) -> tuple[list[int], list[str], Tensor, Tensor]:
        """The new pool's ids and texts (old order, deletions out, edits in place, additions appended),
        ``kept`` (old node → new node, ``-1`` gone or edited) and the new indices of the fresh nodes."""
        deleted, edited = set(self.deleted), dict(self.edited)
        new_ids, new_texts, kept, fresh = [], [], [], []
        for qid, text in zip(map(int, ids), texts, strict=True):
            if qid in deleted:
                kept.append(-1)
                continue
            kept.append(-1 if qid in edited else len(new_ids))
            if qid in edited:
                fresh.append(len(new_ids))
            new_ids.append(qid)
            new_texts.append(edited.get(qid, text))
        for qid, text in self.added:
            fresh.append(len(new_ids))
            new_ids.append(qid)
            new_texts.append(text)
        return new_ids, new_texts, torch.tensor(kept, dtype=torch.long), torch.tensor(fresh, dtype=torch.long)


def update_index(
    index: RetrievalIndex,
    texts: Sequence[str],
    update: PoolUpdate,
    settings: RetrievalSettings,
    cache_dir: str | os.PathLike[str] | None = None,
    encoder: SentenceEncoder | None = None,
) -> tuple[RetrievalIndex, list[str]]:
    """The index of the pool ``update`` makes of ``index``'s (whose questions are ``texts``) and the new
    texts; written atomically to the cache entry a rebuild on the new pool uses (an entry already there is
    returned). Only the edited and added questions are embedded (by ``encoder`` when one is loaded)."""
    ids = index.ids.tolist()
    update.check(ids)
    new_ids, new_texts, kept, fresh = update.apply(ids, texts)
    target = cache_root(cache_dir) / "retrieval-index" / index_key(new_ids, new_texts, settings)
    cached = read_entry(target, RetrievalIndex.load)
    if cached is not None:
        return cached, new_texts
    dim = index.embeddings.shape[1]
    embeddings = torch.empty(len(new_ids), dim, dtype=index.embeddings.dtype)
    survivors = kept >= 0
    embeddings[kept[survivors]] = index.embeddings[survivors]
    if len(fresh):
        fresh_texts = [new_texts[i] for i in fresh.tolist()]
        fresh_embeddings = build_embeddings(fresh_texts, settings, cache_dir=cache_dir, model=encoder)
        embeddings[fresh] = fresh_embeddings.to(embeddings.dtype)
    device = resolve_device(settings.device)
    with pinned_threads(settings.cpu_threads, device):
        graph = update_graph(
            index.graph.to(device), kept.to(device), embeddings.to(device), fresh.to(device), settings
        )
    graph = graph.cpu()
    updated = RetrievalIndex(torch.tensor(new_ids, dtype=torch.long), embeddings, graph, {})
    updated.stats = {**degree_stats(graph), **build_stats_extra(graph, embeddings, settings)}
    updated.save(target)
    return updated, new_texts
