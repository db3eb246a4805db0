r"""Ranking metrics per query against graded relevance, and their bootstrap intervals over queries.

For a query with relevant set :math:`R` (grades :math:`g(d) \in \{1, 2\}`) and ranking
:math:`d_1, d_2, \dots` (empty slots are misses):

- recall@k :math:`= |\{d_1..d_k\} \cap R| / |R|` (any grade counts as relevant);
- reciprocal rank@k :math:`= 1 / \min\{i \le k : d_i \in R\}` (0 when none), MRR@k its mean;
- nDCG@k :math:`= \mathrm{DCG@k} / \mathrm{IDCG@k}` with
  :math:`\mathrm{DCG@k} = \sum_{i \le k} (2^{g(d_i)} - 1) / \log_2(i + 1)` (Järvelin & Kekäläinen's
  exponential gain: a duplicate counts 3, a linked question 1) and IDCG@k the DCG of the grades sorted
  high to low.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from graphctx.metrics.stats import Interval, bootstrap_interval

NDCG_GAIN = (
    "exponential, 2^grade - 1 (duplicate 3, linked 1); ir-measures' nDCG uses the grade itself unless "
    "given these gains: nDCG(gains={1:1,2:3})"
)
"""The nDCG gain, as every output names it (results.json ``ndcg_gain``, results.md)."""


def recall_at_k(ranking: Sequence[int], relevant: Mapping[int, int], k: int) -> float:
    """Share of the relevant pool questions among the first ``k`` ranked.

    Examples:
        >>> recall_at_k([5, 3, 9], {3: 1, 7: 2}, k=2)
        0.5
    """
    return len(set(ranking[:k]) & set(relevant)) / len(relevant)


def reciprocal_rank(ranking: Sequence[int], relevant: Mapping[int, int], k: int) -> float:
    """``1 / rank`` of the first relevant pool question within the first ``k``; 0 if none.

    Examples:
        >>> reciprocal_rank([5, 3, 9], {3: 1, 9: 2}, k=10)
        0.5
        >>> reciprocal_rank([5, 3, 9], {9: 2}, k=2)
        0.0
    """
    return next((1.0 / rank for rank, node in enumerate(ranking[:k], 1) if node in relevant), 0.0)


def ndcg_at_k(ranking: Sequence[int], relevant: Mapping[int, int], k: int) -> float:
    """Normalised discounted cumulative gain with gains ``2**grade - 1``.

    Examples:
        >>> round(ndcg_at_k([5, 3], {3: 2, 7: 1}, k=10), 4)  # (3/log2 3) / (3 + 1/log2 3)
        0.5213
        >>> ndcg_at_k([3, 7], {3: 2, 7: 1}, k=10)
        1.0
    """
    dcg = sum(
        (2 ** relevant[d] - 1) / math.log2(i + 1) for i, d in enumerate(ranking[:k], 1) if d in relevant
    )
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum((2**grade - 1) / math.log2(i + 1) for i, grade in enumerate(ideal, 1))
    return dcg / idcg


def metric_names(recall_ks: Sequence[int], depth: int = 10) -> list[str]:
    """The metric columns: ``recall@k`` for each k, ``mrr@depth``, ``ndcg@depth``."""
    return [*(f"recall@{k}" for k in recall_ks), f"mrr@{depth}", f"ndcg@{depth}"]


def per_query_scores(
    rankings: Sequence[Sequence[int]],
    relevance: Sequence[Mapping[int, int]],
    recall_ks: Sequence[int],
    depth: int = 10,
) -> dict[str, np.ndarray]:
    """Each metric of :func:`metric_names` for every query (rankings hold pool ids; -1 slots are skipped).

    Examples:
        >>> scores = per_query_scores([[3, 5], [-1, -1]], [{3: 2}, {4: 1}], recall_ks=[1])
        >>> {name: values.tolist() for name, values in scores.items()}
        {'recall@1': [1.0, 0.0], 'mrr@10': [1.0, 0.0], 'ndcg@10': [1.0, 0.0]}
    """
    if len(rankings) != len(relevance):
        raise ValueError(f"{len(rankings)} rankings for {len(relevance)} queries")
    pairs = [
        ([node for node in ranking if node >= 0], grades)
        for ranking, grades in zip(rankings, relevance, strict=True)
    ]
    scores = {f"recall@{k}": [recall_at_k(r, g, k) for r, g in pairs] for k in recall_ks}
    scores[f"mrr@{depth}"] = [reciprocal_rank(r, g, depth) for r, g in pairs]
    scores[f"ndcg@{depth}"] = [ndcg_at_k(r, g, depth) for r, g in pairs]
    return {name: np.asarray(values, dtype=np.float64) for name, values in scores.items()}


def summarise(
    scores: Mapping[str, np.ndarray], n_resamples: int = 2000, seed: int = 0
) -> dict[str, Interval]:
    """Mean of each metric with its 95% percentile bootstrap interval over queries
    (:func:`graphctx.metrics.stats.bootstrap_interval`)."""
    return {name: bootstrap_interval(values, 0.95, n_resamples, seed) for name, values in scores.items()}
