"""Retrieval judged against the dump's links: every retriever of the config and a sweep of the graph
threshold T.

Pool and queries are embedded once (:func:`evaluate_retrieval` takes the embeddings); each T of the sweep
rebuilds only the question graph. Every entry of the retriever registry (:mod:`graphctx.retrieval.
registry`: ``graph``, ``dense``, ``bm25``, ``hybrid`` and the config's ``retrieval.extra`` plug-ins) is
built over the pool exactly as the answering path builds it and ranks ``depth`` pool questions per query:

- ``graph``: the personalized-PageRank retriever at the config's T (cosine fallback included), the
  method every other one is compared with;
- ``dense``: cosine top-k (the paper's TextGen retrieval);
- ``bm25``: :class:`~graphctx.retrieval.lexical.BM25Index` over the pool texts;
- ``hybrid``: reciprocal rank fusion of ``graph`` and ``bm25`` (:mod:`graphctx.retrieval.fusion`), each
  ranked :data:`~graphctx.retrieval.registry.FUSION_DEPTH` deep: the two disagree most (semantic
  neighbourhood against shared rare terms, such as error strings and tool names), and fusing by rank needs
  no calibration of PageRank probabilities against BM25 scores.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from graphctx.errors import ConfigError
from graphctx.evaluation.retrieval_eval.measures import metric_names, per_query_scores, summarise
from graphctx.metrics.stats import Interval, PairedComparison, paired_test
from graphctx.retrieval.builders import build_graph, build_query_edges
from graphctx.retrieval.graph import (
    degree_stats,
    graph_fallbacks,
    linkage_stats,
)
from graphctx.retrieval.index import RetrievalIndex
from graphctx.retrieval.registry import GraphEntry, PoolView, RetrieverEntry, retriever_entries
from graphctx.retrieval.retriever import GraphRetriever, Hit
from graphctx.retrieval.settings import RetrievalSettings

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


def _timed(work: Callable[[], object]) -> tuple[object, float]:
    start = time.perf_counter()
    result = work()
    return result, time.perf_counter() - start


def registry_rankings(
    pool: Pool, queries: Queries, settings: RetrievalSettings, depth: int
) -> dict[str, tuple[list[list[int]], float]]:
    """Per retriever of the registry (built-ins, then ``settings.extra``): its ``depth`` pool ids per query,
    and the seconds it took to build over the pool and rank. All run on the CPU, every query in one batch,
    with the queries' embeddings as given."""
    at_depth = replace(settings, top_k=depth, device="cpu", use_faiss=False)
    at_depth = replace(at_depth, query_batch_size=max(1, len(queries.texts)))
    rows = {text: row for row, text in enumerate(queries.texts)}

    def embedded(texts: Sequence[str]) -> Tensor:
        return queries.embeddings[[rows[text] for text in texts]]

    index = cache(lambda method: _index(pool, at_depth))  # the graph at T serves graph and hybrid alike
    view = PoolView(list(pool.ids), list(pool.texts), index, embedded=embedded)
    found = {}
    for name, entry in retriever_entries(at_depth).items():

        def ranked(entry: RetrieverEntry = entry) -> list[list[int]]:
            with contextlib.redirect_stderr(io.StringIO()):  # the sweep reports the graph's density
                retriever = entry.build(view)
            return _hit_ids(retriever.retrieve(queries.texts), depth)

        found[name] = _timed(ranked)
    return found


def evaluate_retrieval(
    pool: Pool,
    queries: Queries,
    settings: RetrievalSettings,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    recall_ks: Sequence[int] = (2, 10),
    depth: int = 10,
    n_resamples: int = 2000,
) -> RetrievalEvaluation:
    """Score every retriever of the registry (:func:`registry_rankings`; graph at ``settings.threshold``)
    and the graph at each of ``thresholds``: recall at each of ``recall_ks``, MRR and nDCG at ``depth``,
    with bootstrap intervals, and each other retriever's paired difference from graph
    (:attr:`MethodResult.versus_graph`)."""
    names = metric_names(recall_ks, depth)
    deep = max(depth, *recall_ks)

    def per_query(ranking: list[list[int]]) -> dict[str, np.ndarray]:
        return per_query_scores(ranking, queries.relevance, recall_ks, depth)

    rankings = registry_rankings(pool, queries, settings, deep)
    entries = retriever_entries(settings)
    graph_scores = per_query(rankings[GraphEntry.name][0])
    methods = []
    for name, (ranking, seconds) in rankings.items():
        scores = per_query(ranking)
        versus = None
        if name != GraphEntry.name:
            versus = {
                metric: paired_test(scores[metric], graph_scores[metric], n_resamples=n_resamples)
                for metric in names
            }
        threshold = settings.threshold if entries[name].uses_threshold else None
        summary = summarise(scores, n_resamples)
        ranked = scored_rows(ranking, deep)
        methods.append(MethodResult(name, threshold, summary, seconds, versus_graph=versus, ranking=ranked))
    sweep = []
    for threshold in thresholds:
        (ranking, density), seconds = _timed(
            lambda t=threshold: graph_ranking(pool, queries, settings, t, deep)
        )
        shown = {key: float(density[key]) for key in DENSITY_KEYS}
        summary = summarise(per_query(ranking), n_resamples)
        sweep.append(
            MethodResult(
                "graph", float(threshold), summary, seconds, shown, ranking=scored_rows(ranking, deep)
            )
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
