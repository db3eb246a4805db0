"""Bootstrap confidence intervals, a paired significance test and Holm's correction for the results table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Interval:
    """A mean with its bootstrap confidence interval over ``n`` scored rows."""

    mean: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class PairedComparison:
    """Variant A minus variant B on the same rows: mean difference, its interval, and the p-value."""

    mean_difference: float
    low: float
    high: float
    p_value: float
    n: int
    p_holm: float = float("nan")
    """``p_value`` Holm-corrected across the table's comparisons (:func:`holm`); NaN until corrected."""


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    return array[~np.isnan(array)]


def _mean_interval(values: np.ndarray, confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean; a constant sample has the degenerate interval."""
    if np.ptp(values) == 0:
        return float(values[0]), float(values[0])
    result = stats.bootstrap(
        (values,),
        np.mean,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def bootstrap_interval(
    scores: Sequence[float] | np.ndarray, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> Interval:
    """Mean of the per-row ``scores`` (NaN rows dropped) with a percentile bootstrap interval."""
    values = _finite(scores)
    if values.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    low, high = _mean_interval(values, confidence, n_resamples, seed)
    return Interval(float(values.mean()), low, high, int(values.size))


def paired_test(
    scores_a: Sequence[float] | np.ndarray,
    scores_b: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    n_resamples: int = 10000,
    seed: int = 0,
    n_permutations: int | None = None,
) -> PairedComparison:
    """Two-sided paired permutation test of mean(A − B) = 0 over rows scored by both variants.

    Under the null each row's two scores are exchangeable, so the test flips the sign of each row's
    difference d_i at random, ``n_permutations`` times (default ``n_resamples``; scipy ``permutation_test``
    with ``permutation_type="samples"``, exact when 2^n is fewer); the interval is a percentile bootstrap
    of mean(d) with ``n_resamples`` resamples. One row gives p = 1: its two flips, +d and -d, are equally
    extreme (scipy refuses a sample of one).
    """
    a = np.asarray(scores_a, dtype=np.float64)
    b = np.asarray(scores_b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired_test: {a.size} scores for A but {b.size} for B; pair them by row id first")
    both = ~(np.isnan(a) | np.isnan(b))
    a, b = a[both], b[both]
    if a.size == 0:
        return PairedComparison(float("nan"), float("nan"), float("nan"), float("nan"), 0)
    differences = a - b
    low, high = _mean_interval(differences, confidence, n_resamples, seed)
    if a.size == 1 or (np.ptp(differences) == 0 and differences[0] == 0):
        p_value = 1.0
    else:
        p_value = stats.permutation_test(
            (a, b),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples",
            vectorized=True,
            n_resamples=n_resamples if n_permutations is None else n_permutations,
            alternative="two-sided",
            rng=np.random.default_rng(seed),
        ).pvalue
    return PairedComparison(float(differences.mean()), low, high, float(p_value), int(a.size))


def smallest_p(rows: int) -> float:
    """The smallest two-sided p the exact sign-flip test of :func:`paired_test` can give over ``rows``
    paired differences: all of one sign, 2 of the 2^rows flips are as extreme, so 2 / 2^rows."""
    return min(1.0, 2.0 / 2.0**rows)


def rows_needed(tests: int, alpha: float = 0.05) -> int:
    """The fewest paired rows with which the best of ``tests`` Holm-corrected tests can reach ``alpha``:
    the least n with tests · 2 / 2^n ≤ alpha (Holm multiplies the smallest p by the number of tests)."""
    return max(1, math.ceil(math.log2(2.0 * tests / alpha)))


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    r"""Holm's step-down adjusted p-values (family-wise error control for m tests, NaN entries left out).

    With the m finite p-values sorted ascending, :math:`p_{(1)} \le \dots \le p_{(m)}`,

    .. math:: \tilde p_{(i)} = \min\Bigl(1,\ \max_{j \le i}\, (m - j + 1)\, p_{(j)}\Bigr),

    returned in the input order (as ``statsmodels``' ``multipletests(method="holm")``); rejecting every
    :math:`\tilde p \le \alpha` keeps the chance of any false rejection at most :math:`\alpha`.
    """
    values = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(values.shape, np.nan)
    finite = np.flatnonzero(~np.isnan(values))
    order = finite[np.argsort(values[finite], kind="stable")]
    m = len(order)
    scaled = (m - np.arange(m)) * values[order]
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return adjusted
