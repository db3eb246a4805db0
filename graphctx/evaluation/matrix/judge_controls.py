"""The judges' control pairs in an evaluation run: scored before each judge metric scores the answers,
cached, and reported in results.md and ``judges.json``; and the table's columns with one value throughout.

Each metric that declares :attr:`~graphctx.metrics.registry.MetricEntry.judge_keys` scores the run's
control pairs (:mod:`graphctx.metrics.judge_check`) with its own row scorer, as it scores answers. Its
pair scores are cached under ``<cache>/judge_controls/<metric>-<key>.json``, the key the fingerprint of the
metric's scorer (:meth:`~.resume_guard.ResumeGuard.scorer_parts`: settings, models, libraries) and of the
pairs themselves: a rerun reads them, a changed judge or other pairs score them again; nothing is deleted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graphctx.cache import cache_root, fingerprint, write_json_atomic
from graphctx.evaluation.matrix.scorer import Scorer
from graphctx.evaluation.matrix.table import ResultsTable, VariantScores, column_name, metric_key
from graphctx.metrics.judge_check import (
    CONTROL_PAIRS,
    MIN_ACCEPT_GAP,
    MIN_AUC,
    MIN_SIDE,
    MIN_WORDS,
    ControlPairs,
    JudgeCheck,
    check_judge,
    control_pairs,
)
from graphctx.metrics.registry import MetricEntry

FORMAT = 1
"""Bump when the cached pair scores change meaning."""
SIDES = ("supported", "unsupported")


@dataclass
class JudgeControls:
    """The control pairs of one run and their per-judge scores in the cache."""

    pairs: ControlPairs
    seed: int
    cache_dir: str | None
    scorer_parts: Callable[[str], dict[str, Any]]
    """Metric → what computes its scores (the resume guard's)."""

    @classmethod
    def of_rows(
        cls,
        rows: Sequence[Mapping[str, Any]],
        seed: int,
        cache_dir: str | None,
        scorer_parts: Callable[[str], dict[str, Any]],
    ) -> JudgeControls:
        """The control pairs of the evaluated ``rows`` (their ``id``, ``question`` and gold ``answer``)."""
        pairs = control_pairs(
            [int(row["id"]) for row in rows],
            [row["question"] for row in rows],
            [row["answer"] for row in rows],
            seed,
        )
        return cls(pairs, seed, cache_dir, scorer_parts)

    def path(self, metric: str) -> Path:
        """The cache file of ``metric``'s pair scores."""
        key = fingerprint(
            {"format": FORMAT, "scorer": self.scorer_parts(metric), "pairs": self.pairs.as_json()}
        )
        return cache_root(self.cache_dir) / "judge_controls" / f"{metric}-{key}.json"

    def pending(self, entry: MetricEntry) -> bool:
        """Whether ``entry`` is a judge whose control pairs are still to score."""
        return bool(entry.judge_keys and self.pairs.sentences and not self.path(entry.name).is_file())

    def score(self, entry: MetricEntry, scorer: Scorer) -> None:
        """Score the pairs with ``entry``'s loaded ``scorer`` and cache the accept values and scores."""
        accept_base, score_base = entry.judge_keys
        pairs, out = self.pairs, {}
        for side, premises in zip(SIDES, (pairs.supported, pairs.unsupported), strict=True):
            if entry.passages:  # a citation judge: the claim cites its premise as its one passage
                claims = [f"{sentence} [1]" for sentence in pairs.sentences]
                passages = [[premise] for premise in premises]
                rows = scorer.score(pairs.questions, claims, pairs.supported, premises, passages)
            else:
                rows = scorer.score(pairs.questions, pairs.sentences, pairs.supported, premises)
            keys = list(rows[0])
            accept, soft = metric_key(keys, accept_base), metric_key(keys, score_base)
            if accept is None:
                raise ValueError(f"metric {entry.name!r} wrote no {accept_base!r} on its control pairs")
            out[side] = {
                "accept": [_or_none(row[accept]) for row in rows],
                "score": [_or_none(row[soft or accept]) for row in rows],
            }
        write_json_atomic(self.path(entry.name), {"pairs": pairs.as_json(), **out})

    def check(self, entry: MetricEntry) -> JudgeCheck | None:
        """``entry``'s verdict from its cached pair scores; None when they are not there (a stopped run)."""
        path = self.path(entry.name)
        if not path.is_file():
            return None
        stored = json.loads(path.read_text())
        sup, uns = stored["supported"], stored["unsupported"]
        return check_judge(sup["accept"], sup["score"], uns["accept"], uns["score"])


def constant_columns(results: Sequence[VariantScores], keys: Sequence[str]) -> dict[str, tuple[float, int]]:
    """The shown keys with one value on every scored row of every variant: key → (value, rows)."""
    constant = {}
    for key in keys:
        values = np.concatenate([np.asarray(r.scores.get(key, []), dtype=float) for r in results] or [[]])
        values = values[~np.isnan(values)]
        if values.size and np.all(values == values[0]):
            constant[key] = (float(values[0]), int(values.size))
    return constant


@dataclass
class JudgeReport:
    """What results.md and ``judges.json`` say about the judges and the constant columns."""

    controls: JudgeControls
    checks: dict[str, tuple[str, JudgeCheck | None]]
    """Judge metric → (its name in results.md, its verdict; None: not measured in this run)."""
    keys: dict[str, list[str]]
    """Judge metric → its shown score keys."""
    constant: dict[str, tuple[float, int]]

    @classmethod
    def of(
        cls,
        controls: JudgeControls,
        entries: Sequence[MetricEntry],
        table: ResultsTable,
        results: Sequence[VariantScores],
    ) -> JudgeReport:
        checks, keys = {}, {}
        for entry in entries:
            if not entry.judge_keys:
                continue
            shown = [key for base in entry.columns if (key := metric_key(table.keys, base)) is not None]
            name = column_name(shown[0], table.columns) if shown else entry.title or entry.name
            checks[entry.name] = (name, controls.check(entry))
            keys[entry.name] = shown
        return cls(controls, checks, keys, constant_columns(results, table.keys))

    def marks(self) -> dict[str, str]:
        """Score key → its mark in the table's header: ``no signal`` (a judge that cannot tell) and/or
        ``constant``."""
        marks: dict[str, list[str]] = {}
        for metric, (_, check) in self.checks.items():
            if check is not None and check.measured and not check.signal:
                for key in self.keys[metric]:
                    marks.setdefault(key, []).append("no signal")
        for key in self.constant:
            marks.setdefault(key, []).append("constant")
        return {key: ", ".join(names) for key, names in marks.items()}

    def as_json(self) -> dict[str, Any]:
        pairs = self.controls.pairs
        return {
            "construction": {
                "seed": self.controls.seed,
                "max_sentences": CONTROL_PAIRS,
                "min_words": MIN_WORDS,
                "pairs_per_side": len(pairs.sentences),
                "row_ids": pairs.row_ids,
            },
            "thresholds": {"min_auc": MIN_AUC, "min_accept_gap": MIN_ACCEPT_GAP},
            "judges": {
                metric: {"column": name, **(check.as_json() if check else {"verdict": "not measured"})}
                for metric, (name, check) in self.checks.items()
            },
            "constant_columns": {key: {"value": v, "rows": n} for key, (v, n) in self.constant.items()},
        }

    def markdown(self, columns: Mapping[str, str]) -> str:
        """results.md's "Judges on control pairs" section (the constant columns included)."""
        n = len(self.controls.pairs.sentences)
        lines = [
            "## Judges on control pairs",
            "",
            f"Before scoring, each judge scored {n} gold sentences of this run's rows (at most "
            f"{CONTROL_PAIRS}, one sentence of ≥ {MIN_WORDS} words per row, drawn with seed "
            f"{self.controls.seed}) as answers to their own question: against their own gold answer "
            "(supported) and against another question's gold answer (unsupported). AUC: Mann–Whitney over "
            "the judge's score, ties counted half. A judge has no signal when its AUC < "
            f"{MIN_AUC} or its supported accept rate exceeds the unsupported one by less than "
            f"{MIN_ACCEPT_GAP}; its columns are marked (no signal) in the tables above.",
            "",
        ]
        if self.checks:
            lines += [
                "| Judge | AUC | accepted, supported | accepted, unsupported | pairs judged | verdict |",
                "|---|---|---|---|---|---|",
            ]
            why = "the run stopped first" if n else f"fewer than {MIN_SIDE} rows with such a sentence"
            for name, check in self.checks.values():
                if check is None:
                    lines.append(f"| {name} | | | | 0 | not measured ({why}) |")
                    continue
                lines.append(
                    f"| {name} | {_number(check.auc)} | {_number(check.accept_supported)} "
                    f"| {_number(check.accept_unsupported)} | {check.n_supported} + {check.n_unsupported} "
                    f"| {check.verdict} |"
                )
        else:
            lines.append("No metric of this run is a judge.")
        lines += ["", f"Constant columns (one value on every row of every variant): {len(self.constant)}."]
        for key, (value, rows) in self.constant.items():
            lines.append(f"- {column_name(key, columns)}: {value:.4f} on all {rows} rows")
        return "\n".join(lines) + "\n"


def _or_none(value: float) -> float | None:
    """JSON's null for NaN (not judged: over the judge's input limit)."""
    return None if math.isnan(value) else value


def _number(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3f}"
