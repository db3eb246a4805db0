r"""PPR+BM25 fusion as an answering retriever: reciprocal rank fusion (:mod:`graphctx.retrieval.fusion`,
c = 60) of the graph retriever's and BM25's rankings, each ``depth`` deep, cut to ``top_k``; retrieval-eval's
``hybrid`` method.

A fused hit's score is :math:`\sum_r 1 / (60 + \mathrm{rank}_r)`; it is marked ``fallback`` when its only
source is a cosine top-up of the graph ranking (a query with no edge above T, and no BM25 match)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from graphctx.retrieval.fusion import reciprocal_rank_fusion
from graphctx.retrieval.retriever import Hit, Retriever


def _ranking(hits: list[list[Hit]], width: int) -> torch.Tensor:
    rows = [[hit.id for hit in row] + [-1] * (width - len(row)) for row in hits]
    return torch.tensor(rows, dtype=torch.long).view(len(hits), width)


class HybridRetriever:
    """Fuse ``graph`` and ``lexical`` (each ranking ``depth`` deep) into the ``top_k`` best hits."""

    def __init__(self, graph: Retriever, lexical: Retriever, top_k: int, depth: int) -> None:
        self.graph, self.lexical = graph, lexical
        self.top_k, self.depth = top_k, depth

    def retrieve(self, queries: Sequence[str]) -> list[list[Hit]]:
        graph, lexical = self.graph.retrieve(queries), self.lexical.retrieve(queries)
        width = max([len(row) for row in graph + lexical] + [1])
        scores, ids = reciprocal_rank_fusion([_ranking(graph, width), _ranking(lexical, width)], self.top_k)
        hits = []
        for row_ids, row_scores, graph_hits, lexical_hits in zip(
            ids.tolist(), scores.tolist(), graph, lexical, strict=True
        ):
            cosine_only = {hit.id for hit in graph_hits if hit.fallback} - {hit.id for hit in lexical_hits}
            hits.append(
                [
                    Hit(i, score, i in cosine_only)
                    for i, score in zip(row_ids, row_scores, strict=True)
                    if i >= 0
                ]
            )
        return hits
