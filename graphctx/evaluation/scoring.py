"""Per-row scores of generated answers with every metric of ``graphctx.metrics``.

The heavy parts (BERTScore encoder, AutoAIS judge, FactSumm's NER + relation models or the triplet
extractor, UniversalNER or spaCy NER) are loaded once; each call
to :meth:`Scorer.score` uses fresh metric states, so rows can be scored chunk by chunk (resumable). The
gold side of the fact score and the entity Jaccard is extracted once per gold text and shared by every
call (:mod:`graphctx.metrics.gold`), read from ``gold_stores`` where the caller keeps it on disk.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, TypeVar

from graphctx.errors import ConfigError
from graphctx.knowledge.triplets import TripletExtractor
from graphctx.metrics import (
    AutoAIS,
    BertScoreF1,
    EntityJaccard,
    FactScore,
    FactSummExtractor,
    FactSummScore,
    MetricSettings,
    RougeF1,
    RowScoreMetric,
    SpacyEntities,
    UniNEREntities,
    build_judge,
    build_scorer,
)
from graphctx.metrics.choice import choose_entity_scorer, choose_fact_scorer
from graphctx.metrics.facts import EntityFinder
from graphctx.metrics.gold import GoldSide
from graphctx.metrics.settings import METRIC_NAMES

GoldMetric = TypeVar("GoldMetric", FactSummScore, FactScore, EntityJaccard)


class Scorer:
    """ROUGE-1/L, BERTScore, fact score, entity Jaccard and AutoAIS (or the ``metrics`` named) for batches
    of rows, with the models on ``device`` (default: each metric's own ``device`` setting)."""

    def __init__(
        self,
        settings: MetricSettings,
        extractor: TripletExtractor | None,
        cache_dir: str | None = None,
        metrics: Sequence[str] = METRIC_NAMES,
        fact_label: str = "",
        device: str | None = None,
        gold_stores: Mapping[str, MutableMapping[str, Any]] | None = None,
    ) -> None:
        unknown = sorted(set(metrics) - set(METRIC_NAMES))
        if unknown:
            raise ConfigError(f"unknown metric(s) {unknown}; choose from {list(METRIC_NAMES)}")
        facts = settings.facts
        triplets = "fact_score" in metrics and facts.fact_method == "triplets"
        if triplets and extractor is None:
            raise ValueError("the triplet fact score needs a triplet extractor")
        self.settings = settings
        self.metrics = tuple(metrics)
        self.extractor = extractor
        # FactSumm labels itself from its models; the triplet score by the caller's extractor names
        # (``Plan.fact_label``), and never goes unlabelled
        self.fact_label = (fact_label or "triplets") if triplets else choose_fact_scorer(facts, ()).label
        self.bertscore = build_scorer(settings.bertscore, device) if "bertscore" in metrics else None
        self.judge = build_judge(settings.autoais, cache_dir, device) if "autoais" in metrics else None
        self.factsumm = FactSummExtractor(facts, device) if "fact_score" in metrics and not triplets else None
        self.entities: EntityFinder | None = None
        if "entity_jaccard" in metrics:
            self.entities = (
                UniNEREntities(facts, device)
                if facts.entity_method == "uniner"
                else SpacyEntities.load(facts.spacy_model)
            )
        self.entity_label = choose_entity_scorer(facts).label
        self.gold_stores = dict(gold_stores or {})
        self.gold: dict[str, GoldSide] = {}
        """Per metric, its gold side, shared by every batch and variant this scorer scores."""

    def _shared_gold(self, metric: str, built: GoldMetric) -> GoldMetric:
        """``built`` with the gold side of ``metric`` shared across calls (one extraction per gold text)."""
        if metric not in self.gold:
            self.gold[metric] = GoldSide(built.gold_value, self.gold_stores.get(metric))
        built.gold = self.gold[metric]
        return built

    def text_metrics(self) -> list[RowScoreMetric]:
        """Fresh states of the metrics that compare an answer with its gold answer."""
        local = {"sync_on_compute": False}
        built: list[RowScoreMetric] = []
        if "rouge" in self.metrics:
            built.append(RougeF1(self.settings.rouge, **local))
        if self.bertscore is not None:
            built.append(BertScoreF1(self.settings.bertscore, scorer=self.bertscore, **local))
        if self.factsumm is not None:
            fact: GoldMetric = FactSummScore(self.factsumm, label=self.fact_label, **local)
            built.append(self._shared_gold("fact_score", fact))
        elif "fact_score" in self.metrics:
            fact = FactScore(self.extractor, self.settings.facts, label=self.fact_label, **local)
            built.append(self._shared_gold("fact_score", fact))
        if self.entities is not None:
            entities = EntityJaccard(self.entities, label=self.entity_label, **local)
            built.append(self._shared_gold("entity_jaccard", entities))
        return built

    def score(
        self,
        questions: Sequence[str],
        generated: Sequence[str],
        gold: Sequence[str],
        premises: Sequence[str | None],
    ) -> list[dict[str, float]]:
        """Scores of each row; AutoAIS only where there is an attribution passage (NaN elsewhere).

        ``premises[i]`` is the context answer ``i`` was generated from, None when its prompt had no context.
        The metrics score exactly these rows, in this process: they never sync with other ranks (under DDP
        the validation callback scores on rank 0 alone).
        """
        rows: list[dict[str, float]] = [{} for _ in generated]
        for metric in self.text_metrics():
            metric.update(generated, gold)
            _merge(rows, range(len(rows)), metric.per_row())
        if self.judge is None:
            return rows
        autoais = AutoAIS(self.judge, self.settings.autoais, sync_on_compute=False)
        keys = [autoais.output_key(name) for name in autoais.score_states]
        for row in rows:
            row.update(dict.fromkeys(keys, math.nan))
        attributed = [i for i, premise in enumerate(premises) if premise]
        if attributed:
            autoais.update(
                [questions[i] for i in attributed],
                [generated[i] for i in attributed],
                [premises[i] for i in attributed],
            )
            _merge(rows, attributed, autoais.per_row())
        return rows


def _merge(rows: list[dict[str, float]], positions: Sequence[int], per_row: dict) -> None:
    for key, values in per_row.items():
        for position, value in zip(positions, values.tolist(), strict=True):
            rows[position][key] = value
