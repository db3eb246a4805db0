"""BM25 as an answering retriever: the pool's question texts ranked by :class:`~graphctx.retrieval.lexical.
BM25Index` (the ``bm25s`` package), the same ranking retrieval-eval judges."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from graphctx.retrieval.lexical import BM25Index
from graphctx.retrieval.retriever import Hit


class BM25Retriever:
    """The ``top_k`` pool questions by BM25 for each query; a query sharing no term with a pool question
    gets fewer hits (none when it shares none at all)."""

    def __init__(self, ids: Sequence[int], texts: Sequence[str], top_k: int) -> None:
        self.ids = torch.tensor(list(ids), dtype=torch.long)
        self.index = BM25Index(texts)
        self.top_k = top_k

    def retrieve(self, queries: Sequence[str]) -> list[list[Hit]]:
        """Ranked hits, best first, for each query (score: the BM25 score)."""
        scores, nodes = self.index.search(list(queries), self.top_k)
        return [
            [
                Hit(int(self.ids[node]), float(score))
                for node, score in zip(row, row_scores, strict=True)
                if node >= 0
            ]
            for row, row_scores in zip(nodes.tolist(), scores.tolist(), strict=True)
        ]
