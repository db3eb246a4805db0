"""Bootstrap confidence intervals and a paired significance test for the results table."""

from __future__ import annotations

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
) -> PairedComparison:
    """Two-sided paired permutation test of mean(A − B) = 0 over rows scored by both variants.

    Under the null each row's two scores are exchangeable, so the test flips the sign of each row's
    difference d_i at random (scipy ``permutation_test`` with ``permutation_type="samples"``); the
    interval is a percentile bootstrap of mean(d).
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
    if np.ptp(differences) == 0 and differences[0] == 0:
        p_value = 1.0
    else:
        p_value = stats.permutation_test(
            (a, b),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            permutation_type="samples",
            vectorized=True,
            n_resamples=n_resamples,
            alternative="two-sided",
            rng=np.random.default_rng(seed),
        ).pvalue
    return PairedComparison(float(differences.mean()), low, high, float(p_value), int(a.size))
