"""Bootstrap intervals and the paired permutation test behind the results table."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from graphctx.metrics import bootstrap_interval, paired_test
from graphctx.metrics.stats import holm


def test_bootstrap_interval_brackets_the_mean_and_matches_scipy():
    scores = np.random.default_rng(1).beta(2, 5, size=300)
    interval = bootstrap_interval(scores, n_resamples=2000, seed=3)
    assert interval.n == 300
    assert interval.mean == pytest.approx(scores.mean())
    assert interval.low < interval.mean < interval.high
    reference = stats.bootstrap(
        (scores,), np.mean, n_resamples=2000, method="percentile", rng=np.random.default_rng(3)
    ).confidence_interval
    assert (interval.low, interval.high) == pytest.approx((reference.low, reference.high))
    # The normal-theory half-width is 1.96·sd/√n; the bootstrap must agree to a few percent.
    half_width = 1.96 * scores.std(ddof=1) / math.sqrt(scores.size)
    assert (interval.high - interval.low) / 2 == pytest.approx(half_width, rel=0.1)


def test_bootstrap_interval_skips_nan_rows_and_handles_constants():
    interval = bootstrap_interval([1.0, float("nan"), 1.0, 1.0])
    assert (interval.mean, interval.low, interval.high, interval.n) == (1.0, 1.0, 1.0, 3)
    assert bootstrap_interval([float("nan")]).n == 0


def test_paired_test_detects_a_consistent_improvement():
    rng = np.random.default_rng(0)
    baseline = rng.uniform(0.2, 0.6, size=200)
    better = baseline + 0.03 + rng.normal(0, 0.02, size=200)
    result = paired_test(better, baseline, n_resamples=5000)
    assert result.n == 200
    assert result.p_value < 0.01
    assert result.mean_difference == pytest.approx((better - baseline).mean())
    assert result.low < result.mean_difference < result.high
    assert result.low > 0


def test_paired_test_finds_nothing_in_noise_and_drops_unpaired_rows():
    rng = np.random.default_rng(4)
    a = rng.uniform(size=100)
    b = a[rng.permutation(100)]  # the same scores in another order: no systematic difference
    result = paired_test(a, b, n_resamples=2000)
    assert result.p_value > 0.05
    assert result.low < 0 < result.high
    a[0] = float("nan")
    assert paired_test(a, b, n_resamples=200).n == 99
    assert paired_test([0.5, 0.5], [0.5, 0.5]).p_value == 1.0


def test_paired_test_rejects_unaligned_inputs():
    with pytest.raises(ValueError, match="pair them by row id"):
        paired_test([0.1, 0.2, 0.3], [0.1, 0.2])


def test_holm_adjusts_step_down_and_leaves_nan_out():
    # sorted 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04 → running max 0.06 for the last
    assert holm([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    adjusted = holm([np.nan, 0.5, 0.6])
    assert np.isnan(adjusted[0]) and adjusted[1:].tolist() == [1.0, 1.0]  # m = 2, capped at 1
    assert holm([]).size == 0


def test_permutation_count_is_its_own_setting():
    """The bootstrap count sets the interval only; the sign flips set the p-value (and its floor)."""
    rng = np.random.default_rng(3)
    a = rng.normal(0.6, 0.1, 20)
    b = a - 0.05 - rng.normal(0, 0.01, 20)  # every difference positive: p sits at its floor
    few = paired_test(a, b, n_resamples=200, n_permutations=99)
    assert paired_test(a, b, n_resamples=999, n_permutations=99).p_value == few.p_value
    many = paired_test(a, b, n_resamples=200, n_permutations=9999)
    assert few.p_value == pytest.approx(2 / 100) and many.p_value == pytest.approx(2 / 10000)


def test_results_md_says_when_too_few_rows_let_no_paired_test_reach_005():
    """The exact sign-flip test's smallest p is 2 / 2^n (scipy's, all differences of one sign); results.md
    says when Holm's correction keeps every test of the table above 0.05 whatever the answers (six
    questions and 30 tests: all p = 1 in the issue), and how many questions would do."""
    from graphctx.evaluation.matrix.table import VariantScores, build_table, to_markdown
    from graphctx.metrics.stats import rows_needed, smallest_p
    from graphctx.prompts import VARIANTS

    for n in (4, 6, 9):
        assert paired_test(np.arange(n) + 1.0, np.zeros(n), n_permutations=10_000).p_value == smallest_p(n)
    assert rows_needed(30) == 11 and 30 * smallest_p(11) <= 0.05 < 30 * smallest_p(10)
    for n, warned in ((4, True), (8, False)):
        scores = [
            VariantScores(VARIANTS[name], list(range(n)), {"rouge1": np.linspace(0.1, 0.5, n) + shift})
            for name, shift in (("TextGen", 0.0), ("GraphGen", 0.2))
        ]
        markdown = to_markdown(build_table(scores, n_resamples=50))
        assert ("Evaluate at least 6 questions (evaluation.limit)" in markdown) is warned, markdown
