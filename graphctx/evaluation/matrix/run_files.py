"""Where an evaluation's files lie under ``evaluation.output_dir``, and each process's view of them.

predictions/<variant>.jsonl           one line per answered question
predictions/<variant>.meta.json       the settings the answers depend on
scores/<variant>/<metric>.jsonl       one line of that metric's scores per scored question
scores/<variant>/<metric>.meta.json   what computed them
scores/<variant>.jsonl                every metric's scores of each row, joined
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphctx.evaluation.jsonl import RecordFile
from graphctx.evaluation.matrix.shards import shard_path
from graphctx.paths import inside
from graphctx.prompts import Variant


@dataclass(frozen=True)
class RunFiles:
    """The paths of one evaluation's files."""

    output_dir: Path
    metrics: tuple[str, ...]
    """The metrics scored (the config's registry, :mod:`graphctx.metrics.registry`), in scoring order."""

    def predictions_file(self, variant: Variant) -> Path:
        return inside(self.output_dir / "predictions", f"{variant.name}.jsonl", where="evaluation.variants")

    def scores_file(self, variant: Variant) -> Path:
        """Every metric's scores of each row, joined: written from the metric files at the end of a run."""
        return inside(self.output_dir / "scores", f"{variant.name}.jsonl", where="evaluation.variants")

    def metric_file(self, variant: Variant, metric: str) -> Path:
        """One metric's scores of ``variant``, the file a run resumes from."""
        folder = inside(self.output_dir / "scores", variant.name, where="evaluation.variants")
        return inside(folder, f"{metric}.jsonl", where=f"metric {metric}")

    def metric_files(self, variant: Variant) -> list[tuple[Path, str]]:
        """(file, metric) of every metric, in scoring order."""
        return [(self.metric_file(variant, metric), metric) for metric in self.metrics]

    def variant_files(self, variant: Variant) -> list[Path]:
        """Every file of ``variant`` a run writes (predictions, their meta, each metric's, the joined)."""
        predictions = self.predictions_file(variant)
        files = [predictions, predictions.with_suffix(".meta.json"), self.scores_file(variant)]
        for path, _ in self.metric_files(variant):
            files += [path, path.with_suffix(".meta.json")]
        return files


@dataclass
class VariantFiles:
    """One variant's predictions and per-metric scores as this process sees them: the merged files, and
    the files it appends to (its own shards; the merged files themselves in a single process)."""

    predictions: RecordFile
    scores: dict[str, RecordFile]
    mine_predictions: RecordFile
    mine_scores: dict[str, RecordFile]

    @classmethod
    def open(
        cls,
        predictions: tuple[Path, str, str],
        scores: Sequence[tuple[Path, str, str]],
        rank: int,
        world_size: int,
    ) -> VariantFiles:
        """Each file given as (merged path, name in its shards, fingerprint)."""

        def mine(path: Path, name: str, stamp: str) -> RecordFile:
            return RecordFile(path if world_size == 1 else shard_path(path, name, stamp, rank))

        merged = {name: RecordFile(path) for path, name, _ in scores}
        own = merged if world_size == 1 else {name: mine(path, name, fp) for path, name, fp in scores}
        main = RecordFile(predictions[0])
        return cls(main, merged, main if world_size == 1 else mine(*predictions), own)

    @property
    def all_predictions(self) -> dict[int, dict[str, Any]]:
        return self.predictions.records | self.mine_predictions.records

    def all_scores(self, metric: str) -> dict[int, dict[str, Any]]:
        return self.scores[metric].records | self.mine_scores[metric].records
