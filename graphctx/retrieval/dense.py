"""Dense cosine top-k over the pool (the paper's TextGen baseline), in torch or with a FAISS index; near-ties
ranked by :mod:`graphctx.retrieval.ranking`'s rule."""

from __future__ import annotations

import torch
from torch import Tensor

from graphctx.retrieval.ranking import top_k_with_ties


def cosine_top_k(
    queries: Tensor, pool: Tensor, k: int, chunk_size: int = 4096, tolerance: float = 0.0
) -> tuple[Tensor, Tensor]:
    r"""Exact top-k pool rows by cosine for each query (inputs L2-normalised): (scores [B, k], ids [B, k]),
    :math:`s_{qj} = \langle q, p_j \rangle`, cosines within ``tolerance`` tied and ranked by pool row
    (:func:`~graphctx.retrieval.ranking.top_k_with_ties`).

    Queries go ``chunk_size`` at a time, so memory is ``chunk_size × pool``.

    Examples:
        >>> scores, ids = cosine_top_k(torch.tensor([[0.0, 1.0, 0.0]]), torch.eye(3), k=2)
        >>> ids.tolist(), scores.tolist()  # pool rows 0 and 2 tie at 0: row 0 first
        ([[1, 0]], [[1.0, 0.0]])
    """
    k = min(k, len(pool))
    scores, ids = [], []
    for start in range(0, len(queries), chunk_size):
        similarity = queries[start : start + chunk_size] @ pool.T

        def search(n: int, similarity: Tensor = similarity) -> tuple[Tensor, Tensor]:
            best = similarity.topk(n, dim=1)
            return best.values, best.indices

        best_scores, best_ids = top_k_with_ties(search, k, len(pool), tolerance)
        scores.append(best_scores)
        ids.append(best_ids)
    if not scores:
        return queries.new_zeros(0, k), torch.zeros(0, k, dtype=torch.long, device=queries.device)
    return torch.cat(scores), torch.cat(ids)


class FaissIndex:
    """Exact inner-product FAISS index over the pool (``IndexFlatIP``; cosine on normalised vectors).

    Examples:
        >>> index = FaissIndex(torch.eye(3))  # doctest: +SKIP
        >>> index.search(torch.tensor([[0.0, 1.0, 0.0]]), k=1)[1].tolist()  # doctest: +SKIP
        [[1]]
    """

    def __init__(self, pool: Tensor) -> None:
        try:
            import faiss
        except ImportError as error:
            raise ImportError(
                "retrieval.use_faiss=true needs faiss: pip install 'graphctx[faiss]' (faiss-cpu)"
            ) from error
        self.index = faiss.IndexFlatIP(pool.shape[1])
        self.index.add(pool.float().cpu().contiguous().numpy())

    def search(self, queries: Tensor, k: int, tolerance: float = 0.0) -> tuple[Tensor, Tensor]:
        """(scores [B, k], ids [B, k]) on the queries' device, near-ties as :func:`top_k_with_ties`."""
        array = queries.float().cpu().contiguous().numpy()

        def search(n: int) -> tuple[Tensor, Tensor]:
            scores, ids = self.index.search(array, n)
            return torch.from_numpy(scores), torch.from_numpy(ids).long()

        scores, ids = top_k_with_ties(search, k, self.index.ntotal, tolerance)
        return scores.to(queries.device), ids.to(queries.device)


def dense_top_k(
    queries: Tensor,
    pool: Tensor,
    k: int,
    *,
    chunk_size: int = 4096,
    tolerance: float = 0.0,
    faiss_index: FaissIndex | None = None,
) -> tuple[Tensor, Tensor]:
    """Cosine top ``k`` (near-ties within ``tolerance`` in pool order): ``faiss_index`` when given, else
    :func:`cosine_top_k` over ``chunk_size`` queries at a time, the pool cast to the queries' dtype.

    Examples:
        >>> pool = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
        >>> dense_top_k(torch.tensor([[1.0, 0.0]]), pool, k=2)[1].tolist()  # tied rows: pool order
        [[0, 2]]
    """
    if faiss_index is not None:
        return faiss_index.search(queries, k, tolerance)
    return cosine_top_k(queries, pool.to(queries.dtype), k, chunk_size, tolerance)
