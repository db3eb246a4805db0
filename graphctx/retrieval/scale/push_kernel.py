r"""The CPU loops of forward push (numba): one query at a time per thread, a FIFO queue of the nodes whose
residual exceeds :math:`\varepsilon d_u` (Andersen, Chung & Lang 2006, as PPRGo's ``_calc_ppr_node``), on
the pool's CSR plus the query node :math:`N` and its edges.

Batches run on Python threads (the loops release the GIL; numba's own threading layer is left out, as
its start-up per call, about 8 ms next to Faiss's OpenMP, is far above a query's cost). Each thread owns a
workspace of pool size (estimate, residual, query-edge weight, queue, touched list,
flags) allocated once per :class:`~graphctx.retrieval.scale.push.PoolPush`; a query writes only the entries it
touches and resets exactly those, so its cost is the edges it pushes over, never :math:`N`.
"""

from __future__ import annotations

import numba
import numpy as np

TOUCHED, QUEUED = np.uint8(1), np.uint8(2)


@numba.njit(cache=True, nogil=True)
def _add(v, amount, n, degree, extra, q_degree, eps, residual, flags, queue, tail, touched, count):
    """Add ``amount`` to the residual of ``v``; record it as touched and queue it once over the bound.
    Returns the new queue tail and touched count."""
    residual[v] += amount
    if flags[v] & TOUCHED == 0:
        flags[v] |= TOUCHED
        touched[count] = v
        count += 1
    d = q_degree if v == n else degree[v] + extra[v]
    if flags[v] & QUEUED == 0 and residual[v] > eps * d:
        flags[v] |= QUEUED
        queue[tail] = v
        tail = (tail + 1) % (n + 1)
    return tail, count


@numba.njit(cache=True, nogil=True)
def push_one(rowptr, col, weight, degree, q_node, q_weight, alpha, eps, work, index, flags):
    r"""Push from the query node until every residual is at most ``eps`` times its weighted degree.

    ``work`` [3, N+1] float64 (estimate, residual, query-edge weight) and ``index`` [2, N+1] int64 (queue,
    touched) are zero / free on entry; ``flags`` [N+1] uint8 zero. Returns the touched count (the touched
    nodes are ``index[1, :count]``, estimates in ``work[0]``) and the number of pushes; the caller resets.
    """
    n = len(degree)
    estimate, residual, extra = work[0], work[1], work[2]
    queue, touched = index[0], index[1]
    q_degree = 0.0
    for i in range(len(q_node)):
        extra[q_node[i]] += q_weight[i]
        q_degree += q_weight[i]
    if q_degree <= 0.0:
        return 0, 0
    residual[n] = 1.0
    flags[n] = TOUCHED | QUEUED
    touched[0], queue[0] = n, n
    count, head, tail, pushes = 1, 0, 1, 0
    while head != tail:
        u = queue[head]
        head = (head + 1) % (n + 1)
        flags[u] &= ~QUEUED
        d = q_degree if u == n else degree[u] + extra[u]
        mass = residual[u]
        estimate[u] += (1.0 - alpha) * mass
        residual[u] = 0.0
        pushes += 1
        spread = alpha * mass / d
        if u == n:
            for i in range(len(q_node)):
                tail, count = _add(
                    q_node[i], spread * q_weight[i], n, degree, extra, q_degree, eps,
                    residual, flags, queue, tail, touched, count,
                )  # fmt: skip
            continue
        for e in range(rowptr[u], rowptr[u + 1]):
            tail, count = _add(
                col[e], spread * weight[e], n, degree, extra, q_degree, eps,
                residual, flags, queue, tail, touched, count,
            )  # fmt: skip
        if extra[u] > 0.0:
            tail, count = _add(
                n, spread * extra[u], n, degree, extra, q_degree, eps,
                residual, flags, queue, tail, touched, count,
            )  # fmt: skip
    return count, pushes


@numba.njit(cache=True, nogil=True)
def top_k_ties(nodes, scores, k, tolerance, stride, out_ids, out_scores):
    """Write the best ``k`` of ``nodes`` by ``scores`` into ``out_ids`` / ``out_scores`` by the ranking
    rule of :mod:`~graphctx.retrieval.ranking` (tie classes high to low, pool order inside a class)."""
    order = np.argsort(-scores, kind="mergesort")
    keys = np.empty(len(order), dtype=np.int64)
    taken, tie_class = 0, 0
    for i in range(len(order)):
        if i > 0 and scores[order[i - 1]] - scores[order[i]] > tolerance:
            if taken >= k:
                break
            tie_class += 1
        keys[taken] = tie_class * stride + nodes[order[i]]
        taken += 1
    ranked = np.argsort(keys[:taken], kind="mergesort")
    for j in range(min(k, taken)):
        pick = order[ranked[j]]
        out_ids[j] = nodes[pick]
        out_scores[j] = scores[pick]


@numba.njit(cache=True, nogil=True)
def _one_query(rowptr, col, weight, degree, q_node, q_weight, alpha, eps, k, tolerance,
               work, index, flags, out_ids, out_scores):  # fmt: skip
    """Push one query, rank its touched pool nodes, reset the workspace; returns the pushes."""
    n = len(degree)
    count, pushes = push_one(rowptr, col, weight, degree, q_node, q_weight, alpha, eps, work, index, flags)
    touched = index[1, :count]
    pool = touched[touched != n]
    top_k_ties(pool, work[0][pool], k, tolerance, n + 1, out_ids, out_scores)
    for v in touched:
        work[0, v] = 0.0
        work[1, v] = 0.0
        flags[v] = 0
    for v in q_node:
        work[2, v] = 0.0
    return pushes


@numba.njit(cache=True, nogil=True)
def push_strided(rowptr, col, weight, degree, q_ptr, q_node, q_weight, alpha, eps, k, tolerance,
                 first, step, work, index, flags, out_ids, out_scores, out_pushes):  # fmt: skip
    """Queries ``first, first + step, ...`` (query ``b``'s edges are ``q_ptr[b]:q_ptr[b+1]`` of ``q_node``
    / ``q_weight``) on one workspace; without the GIL, so threads run strides side by side."""
    for b in range(first, len(q_ptr) - 1, step):
        lo, hi = q_ptr[b], q_ptr[b + 1]
        out_pushes[b] = _one_query(
            rowptr, col, weight, degree, q_node[lo:hi], q_weight[lo:hi], alpha, eps, k, tolerance,
            work, index, flags, out_ids[b], out_scores[b],
        )  # fmt: skip
