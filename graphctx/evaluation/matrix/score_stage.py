"""The scores stage of an evaluation, and the scores of the requested rows collected for the table.

Metric by metric (each metric's models loaded once in this process, on its own device when launched on
GPUs, and freed before the next), one unit (a decoding batch) at a time, every answered row a metric has not
scored yet is scored and its line appended; a stop request is honoured before each batch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphctx.evaluation.jsonl import RecordFile
from graphctx.evaluation.matrix.answering import FALLBACK
from graphctx.evaluation.matrix.judge_controls import JudgeControls
from graphctx.evaluation.matrix.run_files import RunFiles, VariantFiles
from graphctx.evaluation.matrix.scorer import Scorer
from graphctx.evaluation.matrix.shards import Unit
from graphctx.evaluation.matrix.table import VariantScores
from graphctx.metrics.gold import FolderStore
from graphctx.metrics.registry import MetricEntry
from graphctx.pipeline.answerer import Answerer
from graphctx.pipeline.processes import StopRequest
from graphctx.progress import Progress
from graphctx.prompts import Variant


@dataclass
class ScoreStage:
    """The scores of one evaluation's answered rows; the fact score's LLM extractor is the base model,
    lent by ``answerer``."""

    entries: Sequence[MetricEntry]
    """The metrics to score, in order (:attr:`RunConfig.metric_entries`)."""
    answerer: Answerer
    device: str | None
    rows: Sequence[dict[str, Any]]
    files: Mapping[str, VariantFiles]
    stop: StopRequest
    log: Callable[[str], None]
    gold_folder: Callable[[str], Path]
    """Metric → the folder of its gold values (shared by every variant and run with its scorer)."""
    controls: JudgeControls | None = None
    """The run's judge control pairs, scored by each judge metric before its rows (None: not here, e.g.
    on ranks other than 0)."""

    def score(self, units: Sequence[Unit]) -> None:
        """Score the answered rows of ``units`` that a metric has not scored yet (module docstring)."""
        for entry in self.entries:
            if not self.score_metric(entry, units):
                return
            self.answerer.release()  # the metric's models (and a lent base model) go before the next

    def unscored(self, unit: Unit, metric: str) -> list[int]:
        """The ids of the unit's answered rows that ``metric`` has not scored."""
        files = self.files[unit.variant]
        answers, scored = files.all_predictions, files.all_scores(metric)
        ids = (int(self.rows[r]["id"]) for r in unit.rows)
        return [i for i in ids if i in answers and i not in scored]

    def score_metric(self, entry: MetricEntry, units: Sequence[Unit]) -> bool:
        """Score ``units``' rows by ``entry``; False when a stop request ended the stage."""
        metric = entry.name
        scorer: Scorer | None = None
        if self.controls is not None and self.controls.pending(entry):
            if self.stop.requested:
                self.log("stop requested: no further scoring")
                return False
            self.log(f"loading the {metric} metric")
            scorer = self.scorer(entry)
            self.controls.score(entry, scorer)
            self.log(f"{metric}: judged {len(self.controls.pairs.sentences)} control pairs a side")
        chunks = [(unit, chunk) for unit in units if (chunk := self.unscored(unit, metric))]
        if not chunks:
            return True
        with Progress(f"scores ({metric})", sum(len(chunk) for _, chunk in chunks)) as progress:
            return self.score_chunks(entry, chunks, scorer, progress)

    def score_chunks(
        self,
        entry: MetricEntry,
        chunks: Sequence[tuple[Unit, list[int]]],
        scorer: Scorer | None,
        progress: Progress,
    ) -> bool:
        """Score each unit's unscored rows (``chunks``) by ``entry``; False on a stop request."""
        metric = entry.name
        for unit, chunk in chunks:
            if self.stop.requested:
                self.log("stop requested: no further scoring")
                return False
            if scorer is None:
                self.log(f"loading the {metric} metric")
                scorer = self.scorer(entry)
            files = self.files[unit.variant]
            rows = [files.all_predictions[i] for i in chunk]
            values = scorer.score(
                [r["question"] for r in rows],
                [r["generated"] for r in rows],
                [r["gold"] for r in rows],
                [r["context"] or None for r in rows],
                [r.get("passages") for r in rows],
            )
            files.mine_scores[metric].append({"id": i, **v} for i, v in zip(chunk, values, strict=True))
            self.log(f"{unit.variant}: batch {unit.number + 1} scored ({metric})")
            progress.advance(len(chunk), f"{unit.variant} batch {unit.number + 1} done")
        return True

    def scorer(self, entry: MetricEntry) -> Scorer:
        """A :class:`Scorer` of ``entry`` alone, with the knowledge stage's triplet extractor when it needs
        one (the triplet fact score)."""
        extractor = self.answerer.triplet_extractor() if entry.needs_extractor() else None
        return Scorer(
            [entry],
            extractor,
            self.answerer.settings.cache_dir,
            device=self.device,
            gold_stores={entry.name: FolderStore(self.gold_folder(entry.name))},
        )


def collect(
    variants: Sequence[Variant], run_files: RunFiles, rows: Sequence[dict[str, Any]]
) -> list[VariantScores]:
    """Every variant's scores of the requested ``rows`` (rows outside them stay in the files, left out of
    the table), read from its (merged) metric files, rows in id order."""
    ids = [int(row["id"]) for row in rows]
    return [_variant_scores(variant, run_files, ids) for variant in variants]


def _variant_scores(variant: Variant, run_files: RunFiles, ids: list[int]) -> VariantScores:
    predictions = RecordFile(run_files.predictions_file(variant)).records
    by_metric = [RecordFile(path).records for path, _ in run_files.metric_files(variant)]
    scored = [i for i in ids if i in predictions and all(i in s for s in by_metric)]
    scores = {i: {k: v for s in by_metric for k, v in s[i].items()} for i in scored}
    keys = sorted({key for i in scored for key in scores[i] if key != "id"})
    columns = {
        key: np.array([np.nan if (v := scores[i].get(key)) is None else v for i in scored], dtype=float)
        for key in keys
    }
    answered = [predictions[i] for i in scored]
    return VariantScores(
        variant,
        scored,
        columns,
        prompts_truncated=sum(bool(p.get("prompt_truncated")) for p in answered),
        prompts_over_limit=sum(bool(p.get("prompt_over_limit")) for p in answered),
        kg_lost_entities=sum(len(p.get("kg_lost_entities", ())) for p in answered),
        baseline_fallbacks=sum(p.get("stop") == FALLBACK for p in answered),
        retrieval_fallbacks=[p.get("retrieval_fallback", []) for p in answered],
        prompts={
            i: hashlib.sha1(p["prompt"].encode()).hexdigest()
            for i, p in zip(scored, answered, strict=True)
            if "prompt" in p
        },
    )
