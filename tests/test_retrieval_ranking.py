"""The ranking rule: scores high to low, each within the tolerance of the one above tied with it, tied
pool questions in pool order; and its top-k, which reads as many candidates as a tie class needs."""

from __future__ import annotations

import torch

from graphctx.retrieval.dense import cosine_top_k
from graphctx.retrieval.ranking import tie_order, top_k_with_ties


def test_tie_classes_chain_and_go_in_pool_order() -> None:
    group = torch.tensor([0, 0, 0, 0, 1, 1])
    score = torch.tensor([0.5, 0.5 + 6e-7, 0.5 + 12e-7, 0.3, 0.9, 0.9], dtype=torch.float64)
    node = torch.tensor([7, 3, 9, 1, 2, 0])
    order = tie_order(group, score, node, tolerance=1e-6)
    # 0.5000012, 0.5000006 and 0.5 chain into one class (each within 1e-6 of the one above)
    assert node[order].tolist() == [3, 7, 9, 1, 0, 2]
    assert node[tie_order(group, score, node, tolerance=0.0)].tolist() == [9, 3, 7, 1, 0, 2]


def test_top_k_reads_candidates_until_the_tie_class_ends() -> None:
    """Twenty scores within 1e-6 of each other, the highest on the highest pool rows: the best two by the
    rule are pool rows 0 and 1, which the first k + 8 candidates do not hold."""
    scores = (0.7 + 1e-8 * torch.arange(20, dtype=torch.float64))[None, :]
    scores = torch.cat([scores, torch.full((1, 5), 0.1, dtype=torch.float64)], 1)
    calls = []

    def search(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append(n)
        best = scores.topk(n, dim=1)
        return best.values, best.indices

    values, ids = top_k_with_ties(search, 2, scores.shape[1], tolerance=1e-6)
    assert ids.tolist() == [[0, 1]] and calls == [10, 20, 25]
    assert values.tolist() == [[0.7, 0.7 + 1e-8]]


def test_cosine_top_k_follows_the_rule_against_brute_force() -> None:
    generator = torch.Generator().manual_seed(0)
    pool = torch.nn.functional.normalize(torch.randn(30, 8, generator=generator), dim=1)
    pool = torch.cat([pool, pool[:10]])  # copies: exact ties
    queries = torch.cat(
        [pool[:10], torch.nn.functional.normalize(torch.randn(5, 8, generator=generator), dim=1)]
    )
    scores, ids = cosine_top_k(queries, pool, 3, chunk_size=4, tolerance=1e-6)
    for row in range(len(queries)):
        cosines = (pool @ queries[row]).double()
        order = tie_order(torch.zeros(40, dtype=torch.long), cosines, torch.arange(40), 1e-6)
        assert ids[row].tolist() == order[:3].tolist()
        torch.testing.assert_close(scores[row].double(), cosines[order[:3]])
    assert all(ids[q, :2].tolist() == [q, q + 30] for q in range(10))
