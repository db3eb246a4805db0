"""Per-row scores of generated answers with every metric of ``graphctx.metrics``.

The heavy parts (BERTScore encoder, AutoAIS judge, triplet extractor, spaCy NER) are loaded once; each call
to :meth:`Scorer.score` uses fresh metric states, so rows can be scored chunk by chunk (resumable).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import spacy

from graphctx.errors import ConfigError
from graphctx.knowledge.triplets import TripletExtractor
from graphctx.metrics import (
    AutoAIS,
    BertScoreF1,
    EntityJaccard,
    FactScore,
    MetricSettings,
    RougeF1,
    RowScoreMetric,
    build_judge,
    build_scorer,
)
from graphctx.metrics.settings import METRIC_NAMES


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
    ) -> None:
        unknown = sorted(set(metrics) - set(METRIC_NAMES))
        if unknown:
            raise ConfigError(f"unknown metric(s) {unknown}; choose from {list(METRIC_NAMES)}")
        if "fact_score" in metrics and extractor is None:
            raise ValueError("the fact score needs a triplet extractor")
        self.settings = settings
        self.metrics = tuple(metrics)
        self.extractor = extractor
        self.fact_label = fact_label
        self.bertscore = build_scorer(settings.bertscore, device) if "bertscore" in metrics else None
        self.judge = build_judge(settings.autoais, cache_dir, device) if "autoais" in metrics else None
        self.nlp = (
            spacy.load(settings.facts.spacy_model, disable=["parser", "lemmatizer"])
            if "entity_jaccard" in metrics
            else None
        )

    def text_metrics(self) -> list[RowScoreMetric]:
        """Fresh states of the metrics that compare an answer with its gold answer."""
        local = {"sync_on_compute": False}
        built: list[RowScoreMetric] = []
        if "rouge" in self.metrics:
            built.append(RougeF1(self.settings.rouge, **local))
        if self.bertscore is not None:
            built.append(BertScoreF1(self.settings.bertscore, scorer=self.bertscore, **local))
        if "fact_score" in self.metrics:
            built.append(FactScore(self.extractor, self.settings.facts, label=self.fact_label, **local))
        if self.nlp is not None:
            built.append(EntityJaccard(self.settings.facts, nlp=self.nlp, **local))
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
