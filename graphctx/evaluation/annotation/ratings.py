"""Figure 3's statistics from the human ratings: the rating distribution, the win rate against the gold
answer, and the annotators' agreement (ordinal Krippendorff's alpha), per site.

Win rate of variant v on a site: for each question q and annotator a, the outcome
``w(q, a) = 1`` if a rated v's answer to q above q's gold answer, ``1/2`` on a tie, ``0`` below; the win
rate is the mean of w over all (q, a). Its 95% interval is a percentile bootstrap over questions of the
per-question means ``w̄(q) = mean_a w(q, a)`` (the annotators of a site rate the same items, so the mean
of the w̄ is the win rate). Resampling questions, not single comparisons, because the questions are what was
drawn: one question's comparisons by its annotators are correlated (an easy question is easy for all), and
a Wilson interval would count them as independent Bernoulli trials — too narrow — and has no place for the
half-wins of ties.

Agreement: Krippendorff's alpha with the ordinal metric, ``α = 1 - D_o / D_e`` (observed over expected
disagreement), over every item of the site (each variant's answers and the gold ones), from the
``krippendorff`` package.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphctx.evaluation.annotation.formats import GOLD, SCALE
from graphctx.evaluation.annotation.ingest import Rating
from graphctx.metrics.stats import Interval, bootstrap_interval

RATINGS = tuple(int(label) for label in SCALE)


@dataclass(frozen=True)
class SiteRatings:
    """One site's figures: rating counts per source, win rate per variant, ordinal alpha."""

    site: str
    annotators: int
    questions: int
    distribution: dict[str, list[int]]
    """source (variant or gold) -> the counts of the ratings 1..5."""
    win_rates: dict[str, Interval]
    """variant -> its win rate against gold, with the bootstrap interval (``n``: questions)."""
    alpha: float
    """Ordinal Krippendorff's alpha (NaN when every rating is the same: no expected disagreement)."""


def distribution(ratings: Sequence[Rating]) -> dict[str, list[int]]:
    """Per source, the counts of each rating 1..5 (variants by name, gold last)."""
    sources = sorted({r.source for r in ratings}, key=lambda s: (s == GOLD, s))
    return {s: [sum(r.source == s and r.rating == k for r in ratings) for k in RATINGS] for s in sources}


def win_outcomes(ratings: Sequence[Rating], variant: str) -> np.ndarray:
    """Per question (sorted by id), the mean over annotators of 1 (above gold), 1/2 (tie), 0 (below)."""
    by_place = {(r.question_id, r.annotator, r.source): r.rating for r in ratings}
    questions = sorted({r.question_id for r in ratings})
    annotators = sorted({r.annotator for r in ratings})
    outcomes = np.empty((len(questions), len(annotators)))
    for i, question in enumerate(questions):
        for j, annotator in enumerate(annotators):
            ours, gold = by_place[question, annotator, variant], by_place[question, annotator, GOLD]
            outcomes[i, j] = 1.0 if ours > gold else 0.5 if ours == gold else 0.0
    return outcomes.mean(axis=1)


def ordinal_alpha(ratings: Sequence[Rating]) -> float:
    """Krippendorff's ordinal alpha of the annotators (rows) over the items (columns)."""
    cells = [(r.annotator, r.item, r.rating) for r in ratings]
    return krippendorff_alpha(cells, "ordinal", RATINGS)


def krippendorff_alpha(cells: Sequence[tuple[str, str, float]], level: str, domain: Sequence[float]) -> float:
    """Krippendorff's alpha at ``level`` of measurement over ``domain`` of the (annotator, item, value)
    ``cells``: annotators are rows, items columns, a missing cell NaN. NaN with fewer than two annotators
    or one value (no expected disagreement)."""
    import krippendorff

    annotators = sorted({annotator for annotator, _, _ in cells})
    items = sorted({item for _, item, _ in cells})
    data = np.full((len(annotators), len(items)), np.nan)
    row, column = {a: i for i, a in enumerate(annotators)}, {t: j for j, t in enumerate(items)}
    for annotator, item, value in cells:
        data[row[annotator], column[item]] = value
    if len(annotators) < 2 or np.unique(data[~np.isnan(data)]).size < 2:
        return float("nan")
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=domain))


def site_ratings(ratings: Sequence[Rating], site: str, samples: int = 2000, seed: int = 0) -> SiteRatings:
    """The figures of ``site`` from its ratings (already checked complete by the import)."""
    mine = [r for r in ratings if r.site == site]
    variants = sorted({r.source for r in mine} - {GOLD})
    wins = {v: bootstrap_interval(win_outcomes(mine, v), n_resamples=samples, seed=seed) for v in variants}
    return SiteRatings(
        site=site,
        annotators=len({r.annotator for r in mine}),
        questions=len({r.question_id for r in mine}),
        distribution=distribution(mine),
        win_rates=wins,
        alpha=ordinal_alpha(mine),
    )


def every_site(ratings: Sequence[Rating], samples: int = 2000, seed: int = 0) -> list[SiteRatings]:
    """:func:`site_ratings` of each site, sorted by name."""
    return [site_ratings(ratings, site, samples, seed) for site in sorted({r.site for r in ratings})]
