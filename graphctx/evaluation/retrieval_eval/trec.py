"""Retrieval-eval's judgments and rankings in the TREC formats that trec_eval, ir-measures and ranx read.

- ``qrels.txt``: ``query 0 pool_question grade`` per relevant pair (duplicate = 2, linked = 1), queries in
  the report's order, pool questions by id. Every judged query has at least one relevant pool question.
- ``run.<method>.txt`` (and ``run.graph.T<T>.txt`` per threshold of the sweep): ``query Q0 pool_question
  rank score tag``, the first :math:`n \\le` ``depth`` pool questions graphctx scored, in its order (empty
  slots dropped first, as :func:`~graphctx.evaluation.retrieval_eval.measures.per_query_scores` drops them).

TREC tools re-sort a run by score and break ties by document id, so the score column is rank-derived,
:math:`n + 1 - \\mathrm{rank}`: strictly decreasing within a query, the tools' order is graphctx's order
whatever the method's own scores (PageRank mass, BM25, fused reciprocal ranks) tie on. A query whose
ranking is empty has no line in a run; the tools then score it 0, as graphctx does. ir-measures computes
graphctx's metrics as ``R@k``, ``RR@10`` and ``nDCG(gains={1: 1, 2: 3})@10`` (trec_eval's nDCG takes the
grade as the gain; graphctx's gain is :math:`2^g - 1`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

QRELS = "qrels.txt"
TAG = "graphctx"


def run_name(method: str, threshold: float | None = None) -> str:
    """The run file of ``method`` (``threshold`` given: the sweep's graph at that T).

    Examples:
        >>> run_name("bm25"), run_name("graph", 0.5), run_name("graph", 0.625)
        ('run.bm25.txt', 'run.graph.T0.50.txt', 'run.graph.T0.625.txt')
    """
    if threshold is None:
        return f"run.{method}.txt"
    digits = f"{threshold:.6f}".rstrip("0")
    whole, fraction = digits.split(".")
    return f"run.{method}.T{whole}.{fraction.ljust(2, '0')}.txt"


def qrels_text(query_ids: Sequence[int], relevance: Sequence[Mapping[int, int]]) -> str:
    """The qrels file's text.

    Examples:
        >>> print(qrels_text([7, 3], [{40: 2, 12: 1}, {5: 1}]), end="")
        7 0 12 1
        7 0 40 2
        3 0 5 1
    """
    if len(query_ids) != len(relevance):
        raise ValueError(f"{len(query_ids)} queries for {len(relevance)} judgments")
    lines = [
        f"{query} 0 {post} {grades[post]}"
        for query, grades in zip(query_ids, relevance, strict=True)
        for post in sorted(grades)
    ]
    return "".join(line + "\n" for line in lines)


def run_text(query_ids: Sequence[int], rankings: Sequence[Sequence[int]], tag: str) -> str:
    """A run file's text: each query's ranked pool questions (already compacted and cut), rank-derived
    scores.

    Examples:
        >>> print(run_text([7, 3], [[12, 40], []], "graphctx.bm25"), end="")
        7 Q0 12 1 2 graphctx.bm25
        7 Q0 40 2 1 graphctx.bm25
    """
    if len(query_ids) != len(rankings):
        raise ValueError(f"{len(query_ids)} queries for {len(rankings)} rankings")
    lines = []
    for query, ranking in zip(query_ids, rankings, strict=True):
        if len(set(ranking)) != len(ranking) or any(post < 0 for post in ranking):
            raise ValueError(f"query {query}: a ranking lists a pool question twice or an empty slot")
        size = len(ranking)
        lines += [f"{query} Q0 {post} {rank} {size + 1 - rank} {tag}" for rank, post in enumerate(ranking, 1)]
    return "".join(line + "\n" for line in lines)
