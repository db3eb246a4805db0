"""Per-row scores of generated answers with the metrics of a config's registry
(:mod:`graphctx.metrics.registry`).

Each metric's heavy parts (BERTScore's encoder, the AutoAIS judge, FactSumm's models or the triplet
extractor, UniversalNER or spaCy NER) are loaded once; each call to :meth:`Scorer.score` uses fresh
metric states, so rows can be scored chunk by chunk (resumable). The gold side of a metric that extracts
from the gold answer is extracted once per gold text and shared by every call
(:mod:`graphctx.metrics.gold`), read from ``gold_stores`` where the caller keeps it on disk.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from graphctx.knowledge.triplets import TripletExtractor
from graphctx.metrics.registry import GoldScored, MetricEntry, RowScorer


class Scorer:
    """The rows' scores by ``entries``, with their models on ``device`` (default: each metric's own)."""

    def __init__(
        self,
        entries: Sequence[MetricEntry],
        extractor: TripletExtractor | None,
        cache_dir: str | None = None,
        device: str | None = None,
        gold_stores: Mapping[str, MutableMapping[str, Any]] | None = None,
    ) -> None:
        stores = dict(gold_stores or {})
        self.entries = list(entries)
        self.scorers: list[RowScorer] = [
            entry.scorer(device, cache_dir, extractor, stores.get(entry.name)) for entry in self.entries
        ]

    @property
    def gold(self) -> dict[str, Any]:
        """Per metric with a gold side, its :class:`~graphctx.metrics.gold.GoldSide` (once it has scored)."""
        return {
            entry.name: score.gold
            for entry, score in zip(self.entries, self.scorers, strict=True)
            if isinstance(score, GoldScored) and score.gold is not None
        }

    def score(
        self,
        questions: Sequence[str],
        generated: Sequence[str],
        gold: Sequence[str],
        premises: Sequence[str | None],
        passages: Sequence[Sequence[str] | None] | None = None,
    ) -> list[dict[str, float]]:
        """Scores of each row; a metric judging attribution only where there is a passage (NaN elsewhere).

        ``premises[i]`` is the context answer ``i`` was generated from, None when its prompt had no context;
        ``passages[i]``, its numbered passages when ``generation.citations`` numbered them (given to the
        metrics that score citations). The metrics score exactly these rows, in this process: they never
        sync with other ranks (under DDP the validation callback scores on rank 0 alone).
        """
        rows: list[dict[str, float]] = [{} for _ in generated]
        for entry, score in zip(self.entries, self.scorers, strict=True):
            extra = [passages or [None] * len(generated)] if entry.passages else []
            for key, values in score(questions, generated, gold, premises, *extra).items():
                for row, value in zip(rows, values, strict=True):
                    row[key] = value
        return rows
