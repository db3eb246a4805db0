"""Per-row scores of generated answers with every metric of ``graphctx.metrics``.

The heavy parts (BERTScore encoder, AutoAIS judge, triplet extractor, spaCy NER) are loaded once; each call
to :meth:`Scorer.score` uses fresh metric states, so rows can be scored chunk by chunk (resumable).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import spacy

from graphctx.knowledge.triplets import TripletExtractor
from graphctx.metrics import (
    AutoAIS,
    BertScoreF1,
    EntityJaccard,
    FactScore,
    MetricSettings,
    RougeF1,
    build_judge,
    build_scorer,
)


class Scorer:
    """ROUGE-1/L, BERTScore, fact score, entity Jaccard and AutoAIS for batches of rows."""

    def __init__(
        self, settings: MetricSettings, extractor: TripletExtractor, cache_dir: str | None = None
    ) -> None:
        self.settings = settings
        self.extractor = extractor
        self.bertscore = build_scorer(settings.bertscore)
        self.judge = build_judge(settings.autoais, cache_dir)
        self.nlp = spacy.load(settings.facts.spacy_model, disable=["parser", "lemmatizer"])

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
        local = {"sync_on_compute": False}
        rows: list[dict[str, float]] = [{} for _ in generated]
        for metric in (
            RougeF1(self.settings.rouge, **local),
            BertScoreF1(self.settings.bertscore, scorer=self.bertscore, **local),
            FactScore(self.extractor, self.settings.facts, **local),
            EntityJaccard(self.settings.facts, nlp=self.nlp, **local),
        ):
            metric.update(generated, gold)
            _merge(rows, range(len(rows)), metric.per_row())
        attributed = [i for i, premise in enumerate(premises) if premise]
        autoais = AutoAIS(self.judge, self.settings.autoais, **local)
        keys = [autoais.output_key(name) for name in autoais.score_states]
        for row in rows:
            row.update(dict.fromkeys(keys, math.nan))
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
