"""Human AIS from the annotators' judgments, per site: AIS per system with its interval, the annotators'
agreement, and how AutoAIS agrees with it (Attributed QA, Bohnet et al. 2022, §4 and its Figure 3).

A system is a (variant, architecture) pair. An item (one question's answer with one attribution) is
attributable to humans by majority: ``h(i) = 1`` when more than half of its annotators judge it AIS
(interpretable and fully supported), ``1/2`` on a tie, else 0. A system's AIS is the mean of h over its
items, with a 95% percentile-bootstrap interval over them (one item per question: resampling questions, as
the project's other intervals). AutoAIS of an item is ``1[P(entail) ≥ 0.5]`` on its attribution; a
system's AutoAIS is its mean over the same items.

AutoAIS vs AIS: Pearson's r over the site's systems of (AutoAIS, AIS) (the paper's system-level 0.96), and
over its items of (AutoAIS, h) (per instance). Systems whose attribution the judge chose
(``judge_in_system``, the AutoAIS-reranked architecture) report AIS only and are left out of both: the judge
would grade its own choice, which the paper rules out.

Agreement: Krippendorff's alpha with the nominal metric over the binary AIS judgments (annotators × items,
all of the site's items), from the ``krippendorff`` package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphctx.evaluation.annotation.ingest import AisRating
from graphctx.evaluation.annotation.ratings import krippendorff_alpha
from graphctx.metrics.stats import Interval, bootstrap_interval


@dataclass(frozen=True)
class Correlation:
    """Pearson's r over ``n`` pairs (NaN with fewer than 3 pairs or a constant side)."""

    r: float
    n: int


@dataclass(frozen=True)
class SystemAis:
    """One (variant, architecture) system on one site."""

    variant: str
    architecture: str
    judge_in_system: bool
    ais: Interval
    """Human AIS (majority per item, a tie half) with its bootstrap interval; ``n``: items."""
    autoais: float
    """Mean AutoAIS over the same items; NaN when the judge chose the attribution."""


@dataclass(frozen=True)
class SiteAis:
    """One site's human-AIS figures."""

    site: str
    annotators: int
    questions: int
    systems: list[SystemAis]
    interpretable: float
    """Share of all judgments that found the answer interpretable."""
    alpha: float
    """Nominal Krippendorff's alpha of the binary AIS judgments (NaN: one annotator or one value)."""
    system_level: Correlation
    instance_level: Correlation


def majority(judgments: Sequence[int]) -> float:
    """1 when more than half of ``judgments`` (0/1) are 1, 1/2 on a tie, else 0."""
    share = sum(judgments) / len(judgments)
    return 1.0 if share > 0.5 else 0.5 if share == 0.5 else 0.0


def pearson(x: Sequence[float], y: Sequence[float]) -> Correlation:
    """Pearson's r of the pairs (NaN when undefined: under 3 pairs, or a side with one value)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return Correlation(float("nan"), int(a.size))
    return Correlation(float(np.corrcoef(a, b)[0, 1]), int(a.size))


def nominal_alpha(ratings: Sequence[AisRating]) -> float:
    """Krippendorff's nominal alpha of the annotators (rows) over the items (columns), AIS 0/1."""
    cells = [(r.annotator, r.item, r.judgment.ais) for r in ratings]
    return krippendorff_alpha(cells, "nominal", (0, 1))


def item_majorities(ratings: Sequence[AisRating]) -> dict[str, float]:
    """Per item, the majority :func:`majority` of its annotators' AIS."""
    votes: dict[str, list[int]] = {}
    for r in ratings:
        votes.setdefault(r.item, []).append(r.judgment.ais)
    return {item: majority(v) for item, v in sorted(votes.items())}


def site_ais(ratings: Sequence[AisRating], site: str, samples: int = 2000, seed: int = 0) -> SiteAis:
    """The figures of ``site`` from its judgments (already checked complete by the import)."""
    mine = [r for r in ratings if r.site == site]
    human = item_majorities(mine)
    first = {r.item: r for r in mine}  # each item's variant and attribution
    systems = []
    for variant, architecture in sorted({(r.source, r.attribution.architecture) for r in mine}):
        items = sorted(
            i for i, r in first.items() if (r.source, r.attribution.architecture) == (variant, architecture)
        )
        judge = any(first[i].attribution.judge_in_system for i in items)
        auto = [first[i].attribution.autoais for i in items]
        systems.append(
            SystemAis(
                variant,
                architecture,
                judge,
                bootstrap_interval([human[i] for i in items], n_resamples=samples, seed=seed),
                float("nan") if judge or None in auto else float(np.mean(auto)),
            )
        )
    scored = [s for s in systems if not math.isnan(s.autoais)]
    instances = [
        (first[i].attribution.autoais, human[i]) for i in human if first[i].attribution.autoais is not None
    ]
    return SiteAis(
        site=site,
        annotators=len({r.annotator for r in mine}),
        questions=len({r.question_id for r in mine}),
        systems=systems,
        interpretable=float(np.mean([r.judgment.interpretable for r in mine])),
        alpha=nominal_alpha(mine),
        system_level=pearson([s.autoais for s in scored], [s.ais.mean for s in scored]),
        instance_level=pearson([a for a, _ in instances], [h for _, h in instances]),
    )


def every_site(ratings: Sequence[AisRating], samples: int = 2000, seed: int = 0) -> list[SiteAis]:
    """:func:`site_ais` of each site, sorted by name."""
    return [site_ais(ratings, site, samples, seed) for site in sorted({r.site for r in ratings})]
