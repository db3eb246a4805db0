"""Retrieval judged against the dump's links: four methods and a sweep of the graph threshold T.

Pool and queries are embedded once (:func:`evaluate_retrieval` takes the embeddings); each T of the sweep
rebuilds only the question graph. Methods, each ranking ``depth`` pool questions per query:

- ``graph``: the existing personalized-PageRank retriever at the config's T (cosine fallback included);
- ``dense``: cosine top-k (the paper's TextGen retrieval);
- ``bm25``: :class:`~graphctx.retrieval.lexical.BM25Index` over the pool texts;
- ``hybrid``: reciprocal rank fusion of ``graph`` and ``bm25`` (:mod:`graphctx.retrieval.fusion`),
  each ranked ``fusion_depth`` deep: the two disagree most (semantic neighbourhood against shared rare
  terms, such as error strings and tool names), and fusing by rank needs no calibration of PageRank
  probabilities against BM25 scores.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from graphctx.errors import ConfigError
from graphctx.evaluation.retrieval_eval.measures import metric_names, per_query_scores, summarise
from graphctx.metrics.stats import Interval, PairedComparison, paired_test
from graphctx.retrieval.builders import build_graph, build_query_edges
from graphctx.retrieval.fusion import reciprocal_rank_fusion
from graphctx.retrieval.graph import (
    degree_stats,
    graph_fallbacks,
    linkage_stats,
)
from graphctx.retrieval.index import RetrievalIndex
from graphctx.retrieval.lexical import BM25Index
from graphctx.retrieval.retriever import DenseRetriever, GraphRetriever, Hit
from graphctx.retrieval.settings import RetrievalSettings

METHODS = ("graph", "dense", "bm25", "hybrid")
DEFAULT_THRESHOLDS = tuple(round(0.50 + 0.05 * i, 2) for i in range(9))
"""0.50, 0.55, ..., 0.90."""
DENSITY_KEYS = (
    "edges",
    "mean_degree",
    "isolated_share",
    "largest_component",
    "linked_share",
    "no_edge_share",
    "fallback_share",
)


@dataclass
class Pool:
    """The pool as retrieval sees it: ids, texts and L2-normalised embeddings (one row per question)."""

    ids: list[int]
    texts: list[str]
    embeddings: Tensor


@dataclass
class Queries:
    """The evaluated questions: texts, embeddings and graded relevant pool ids."""

    ids: list[int]
    texts: list[str]
    embeddings: Tensor
    relevance: list[dict[int, int]]


@dataclass
class MethodResult:
    """One ranking method's metrics (mean and 95% interval over queries) and its ranking time."""

    method: str
    threshold: float | None
    metrics: dict[str, Interval]
    seconds: float
    density: dict[str, float] | None = None
    """Sweep rows: the graph's density at ``threshold`` (:data:`DENSITY_KEYS`)."""
    versus_graph: dict[str, PairedComparison] | None = None
    """Methods other than ``graph``: per metric, this method minus graph on the same queries (paired
    bootstrap interval of the mean difference, permutation p)."""
    ranking: list[list[int]] = field(default_factory=list)
    """Per query, the pool ids scored: empty slots dropped, cut at the deepest metric cut-off (the TREC
    run file's rows, :mod:`graphctx.evaluation.retrieval_eval.trec`)."""


@dataclass
class RetrievalEvaluation:
    """Everything the report shows."""

    methods: list[MethodResult]
    sweep: list[MethodResult]
    metric_names: list[str]
    queries: int
    pool: int
    top_k: int
    query_ids: list[int] = field(default_factory=list)
    relevance: list[dict[int, int]] = field(default_factory=list)
    """Per query of ``query_ids``, its graded relevant pool ids (the qrels)."""


def _hit_ids(hits: list[list[Hit]], depth: int) -> list[list[int]]:
    return [[hit.id for hit in row[:depth]] for row in hits]


def scored_rows(ranking: Sequence[Sequence[int]], depth: int) -> list[list[int]]:
    """Each query's pool ids as the metrics rank them: empty (-1) slots dropped, then the first ``depth``.

    Examples:
        >>> scored_rows([[-1, 4, -1, 7, 9], [-1]], depth=2)
        [[4, 7], []]
    """
    return [[node for node in row if node >= 0][:depth] for row in ranking]


def _index(pool: Pool, graph_settings: RetrievalSettings | None) -> RetrievalIndex:
    ids = torch.tensor(pool.ids, dtype=torch.long)
    if graph_settings is None:  # dense ranking reads no graph
        empty = Data(edge_index=torch.zeros(2, 0, dtype=torch.long), edge_weight=torch.zeros(0))
        empty.num_nodes = len(pool.ids)
        return RetrievalIndex(ids, pool.embeddings, empty, {})
    graph = build_graph(pool.embeddings, graph_settings)
    return RetrievalIndex(ids, pool.embeddings, graph, degree_stats(graph))


def graph_ranking(
    pool: Pool, queries: Queries, settings: RetrievalSettings, threshold: float, depth: int
) -> tuple[list[list[int]], dict[str, float]]:
    """PageRank rankings (pool ids, ``depth`` each) at ``threshold``, and the graph's density there: its
    degree statistics, and how the queries link (``linkage_stats``) with ``fallback_share``, the share of
    the first ``settings.top_k`` hits that come from cosine. The retriever's density warning is not shown:
    the sweep reports the density itself."""
    at_t = replace(settings, threshold=threshold, top_k=depth, device="cpu")
    index = _index(pool, at_t)
    with contextlib.redirect_stderr(io.StringIO()):
        retriever = GraphRetriever(index, at_t, device="cpu")
    ranking = _hit_ids(retriever.rank(queries.embeddings), depth)
    edges = build_query_edges(queries.embeddings, pool.embeddings, at_t)
    flags = graph_fallbacks(index.graph, edges, settings.top_k)
    density = {**index.stats, **linkage_stats(flags, index.stats)}
    density["fallback_share"] = float(np.mean([flag for row in flags for flag in row])) if flags else 0.0
    return ranking, density


def dense_ranking(pool: Pool, queries: Queries, settings: RetrievalSettings, depth: int) -> list[list[int]]:
    """Cosine top-``depth`` pool ids per query."""
    at_depth = replace(settings, top_k=depth, device="cpu", use_faiss=False)
    retriever = DenseRetriever(_index(pool, None), at_depth, device="cpu")
    return _hit_ids(retriever.rank(queries.embeddings), depth)


def bm25_ranking(pool: Pool, queries: Queries, depth: int) -> list[list[int]]:
    """BM25 top-``depth`` pool ids per query (-1 past the pool questions sharing a term)."""
    _, nodes = BM25Index(pool.texts).search(queries.texts, depth)
    ids = torch.tensor(pool.ids, dtype=torch.long)
    return torch.where(nodes >= 0, ids[nodes.clamp_min(0)], -1).tolist()


def fused_ranking(rankings: Sequence[Sequence[Sequence[int]]], depth: int) -> list[list[int]]:
    """Reciprocal rank fusion (c = 60) of rankings of pool ids, ``depth`` per query."""
    tensors = [_padded(ranking) for ranking in rankings]
    return reciprocal_rank_fusion(tensors, depth)[1].tolist()


def _padded(ranking: Sequence[Sequence[int]]) -> Tensor:
    width = max((len(row) for row in ranking), default=0)
    return torch.tensor([[*row, *[-1] * (width - len(row))] for row in ranking], dtype=torch.long).view(
        len(ranking), width
    )


def _timed(run: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


def evaluate_retrieval(
    pool: Pool,
    queries: Queries,
    settings: RetrievalSettings,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    recall_ks: Sequence[int] = (2, 10),
    depth: int = 10,
    fusion_depth: int = 100,
    n_resamples: int = 2000,
) -> RetrievalEvaluation:
    """Score every method of :data:`METHODS` (graph at ``settings.threshold``) and the graph at each of
    ``thresholds``: recall at each of ``recall_ks``, MRR and nDCG at ``depth``, with bootstrap intervals,
    and each other method's paired difference from graph (:attr:`MethodResult.versus_graph`)."""
    names = metric_names(recall_ks, depth)
    deep = max(depth, *recall_ks)

    def per_query(ranking: list[list[int]]) -> dict[str, np.ndarray]:
        return per_query_scores(ranking, queries.relevance, recall_ks, depth)

    def scored(ranking: list[list[int]]) -> dict[str, Interval]:
        return summarise(per_query(ranking), n_resamples)

    def kept(ranking: list[list[int]]) -> list[list[int]]:
        return scored_rows(ranking, deep)

    (graph, _), graph_seconds = _timed(
        lambda: graph_ranking(pool, queries, settings, settings.threshold, fusion_depth)
    )
    dense, dense_seconds = _timed(lambda: dense_ranking(pool, queries, settings, deep))
    bm25, bm25_seconds = _timed(lambda: bm25_ranking(pool, queries, fusion_depth))
    hybrid, fuse_seconds = _timed(lambda: fused_ranking([graph, bm25], deep))
    graph_scores = per_query(graph)

    def versus_graph(ranking: list[list[int]]) -> dict[str, PairedComparison]:
        scores = per_query(ranking)
        return {
            name: paired_test(scores[name], graph_scores[name], n_resamples=n_resamples) for name in names
        }

    methods = [
        MethodResult("graph", settings.threshold, scored(graph), graph_seconds, ranking=kept(graph)),
        MethodResult(
            "dense", None, scored(dense), dense_seconds, versus_graph=versus_graph(dense), ranking=kept(dense)
        ),
        MethodResult(
            "bm25", None, scored(bm25), bm25_seconds, versus_graph=versus_graph(bm25), ranking=kept(bm25)
        ),
        MethodResult(
            "hybrid",
            settings.threshold,
            scored(hybrid),
            graph_seconds + bm25_seconds + fuse_seconds,
            versus_graph=versus_graph(hybrid),
            ranking=kept(hybrid),
        ),
    ]
    sweep = []
    for threshold in thresholds:
        (ranking, density), seconds = _timed(
            lambda t=threshold: graph_ranking(pool, queries, settings, t, deep)
        )
        shown = {key: float(density[key]) for key in DENSITY_KEYS}
        sweep.append(
            MethodResult("graph", float(threshold), scored(ranking), seconds, shown, ranking=kept(ranking))
        )
    return RetrievalEvaluation(
        methods,
        sweep,
        names,
        len(queries.ids),
        len(pool.ids),
        settings.top_k,
        list(queries.ids),
        [dict(grades) for grades in queries.relevance],
    )


def check_thresholds(values: Sequence[float], where: str) -> list[float]:
    """``values`` sorted, each in [0, 1) (as ``retrieval.threshold``); else a ConfigError naming ``where``."""
    bad = [value for value in values if not 0 <= value < 1]
    if bad or not values:
        raise ConfigError(f"{where}: {list(values)}: thresholds must be numbers in [0, 1), at least one")
    return sorted(set(values))
