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
    HARD_KINDS,
    KINDS,
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
from graphctx.progress import Progress

FORMAT = 2
"""Bump when the cached pair scores change meaning (2: the hard kinds of unsupported pair)."""
NEAR_CONSTANT = 0.9
"""Share of a column's scored rows (every variant's) at one value from which the column, not constant, is
marked ``no signal``: it tells at most one row in ten from the rest (graphctx's choice)."""


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
        pool: Sequence[Mapping[str, Any]] = (),
    ) -> JudgeControls:
        """The control pairs of the evaluated ``rows`` (their ``id``, ``question`` and gold ``answer``);
        ``pool``: the retrieval pool's rows, for the hard kinds."""
        pairs = control_pairs(
            [int(row["id"]) for row in rows],
            [row["question"] for row in rows],
            [row["answer"] for row in rows],
            seed,
            pool_questions=[row["question"] for row in pool],
            pool_answers=[row["answer"] for row in pool],
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
        """Score the pairs with ``entry``'s loaded ``scorer`` and cache the accept values and scores: the
        supported side and each kind of unsupported pair (a kind's missing premises stay null); its
        progress is a line per side."""
        pairs = self.pairs
        sides = {"supported": list(pairs.supported)} | {kind: pairs.premises(kind) for kind in KINDS}
        judged = sum(premise is not None for premises in sides.values() for premise in premises)
        out = {}
        with Progress(f"judge controls ({entry.name})", judged, "pairs") as progress:
            for side, premises in sides.items():
                out[side] = self.score_side(entry, scorer, premises)
                progress.advance(sum(p is not None for p in premises), f"{side} pairs judged")
        write_json_atomic(self.path(entry.name), {"pairs": pairs.as_json(), **out})

    def score_side(
        self, entry: MetricEntry, scorer: Scorer, premises: Sequence[str | None]
    ) -> dict[str, list[float | None]]:
        """The accept values and scores of one side's pairs (None where the side has no premise)."""
        accept_base, score_base = entry.judge_keys
        pairs = self.pairs
        rows_at = [i for i, premise in enumerate(premises) if premise is not None]
        accept_values: list[float | None] = [None] * len(premises)
        score_values: list[float | None] = [None] * len(premises)
        if rows_at:
            chosen = [premises[i] for i in rows_at]
            questions = [pairs.questions[i] for i in rows_at]
            supported = [pairs.supported[i] for i in rows_at]
            sentences = [pairs.sentences[i] for i in rows_at]
            if entry.passages:  # a citation judge: the claim cites its premise as its one passage
                claims = [f"{sentence} [1]" for sentence in sentences]
                rows = scorer.score(questions, claims, supported, chosen, [[p] for p in chosen])
            else:
                rows = scorer.score(questions, sentences, supported, chosen)
            keys = list(rows[0])
            accept, soft = metric_key(keys, accept_base), metric_key(keys, score_base)
            if accept is None:
                raise ValueError(f"metric {entry.name!r} wrote no {accept_base!r} on its control pairs")
            for i, row in zip(rows_at, rows, strict=True):
                accept_values[i], score_values[i] = _or_none(row[accept]), _or_none(row[soft or accept])
        return {"accept": accept_values, "score": score_values}

    def checks(self, entry: MetricEntry) -> dict[str, JudgeCheck] | None:
        """``entry``'s verdict per kind of unsupported pair (:data:`KINDS`) from its cached pair scores;
        None when they are not there (a stopped run)."""
        path = self.path(entry.name)
        if not path.is_file():
            return None
        stored = json.loads(path.read_text())
        sup = stored["supported"]
        out = {}
        for kind in KINDS:
            uns = stored[kind]
            both = [
                i for i, (a, b) in enumerate(zip(sup["accept"], uns["accept"], strict=True)) if b is not None
            ]
            out[kind] = check_judge(
                [_nan(sup["accept"][i]) for i in both],
                [_nan(sup["score"][i]) for i in both],
                [_nan(uns["accept"][i]) for i in both],
                [_nan(uns["score"][i]) for i in both],
            )
        return out


def verdict(checks: Mapping[str, JudgeCheck]) -> str:
    """``signal``, ``no signal`` (on the easy kind), ``topic only`` (signal on the easy kind, none on a
    measured hard kind) or ``not measured``."""
    easy = checks[KINDS[0]]
    if easy.verdict != "signal":
        return easy.verdict
    if any(checks[kind].measured and not checks[kind].signal for kind in HARD_KINDS):
        return "topic only"
    return "signal"


def constant_columns(results: Sequence[VariantScores], keys: Sequence[str]) -> dict[str, tuple[float, int]]:
    """The shown keys with one value on every scored row of every variant: key → (value, rows)."""
    constant = {}
    for key in keys:
        values = np.concatenate([np.asarray(r.scores.get(key, []), dtype=float) for r in results] or [[]])
        values = values[~np.isnan(values)]
        if values.size and np.all(values == values[0]):
            constant[key] = (float(values[0]), int(values.size))
    return constant


def near_constant_columns(
    results: Sequence[VariantScores], keys: Sequence[str]
) -> dict[str, tuple[float, int, int]]:
    """The shown keys, not constant, with one value on at least :data:`NEAR_CONSTANT` of their scored rows
    of every variant: key → (that value, its rows, scored rows)."""
    found = {}
    for key in keys:
        values = np.concatenate([np.asarray(r.scores.get(key, []), dtype=float) for r in results] or [[]])
        values = values[~np.isnan(values)]
        if not values.size:
            continue
        distinct, counts = np.unique(values, return_counts=True)
        top = int(np.argmax(counts))
        if len(distinct) > 1 and counts[top] >= NEAR_CONSTANT * values.size:
            found[key] = (float(distinct[top]), int(counts[top]), int(values.size))
    return found


@dataclass
class JudgeReport:
    """What results.md and ``judges.json`` say about the judges and the constant columns."""

    controls: JudgeControls
    checks: dict[str, tuple[str, dict[str, JudgeCheck] | None]]
    """Judge metric → (its name in results.md, its verdict per kind; None: not measured in this run)."""
    keys: dict[str, list[str]]
    """Judge metric → its shown score keys."""
    constant: dict[str, tuple[float, int]]
    near_constant: dict[str, tuple[float, int, int]]
    """Columns with one value on most rows (:func:`near_constant_columns`)."""

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
            checks[entry.name] = (name, controls.checks(entry))
            keys[entry.name] = shown
        constant, near = constant_columns(results, table.keys), near_constant_columns(results, table.keys)
        return cls(controls, checks, keys, constant, near)

    def marks(self) -> dict[str, str]:
        """Score key → its mark in the table's header: ``no signal`` (a judge that cannot tell), ``topic
        only`` (it cannot tell facts apart) and/or ``constant``; ``no signal`` also for a column with one
        value on most rows."""
        marks: dict[str, list[str]] = {}
        for metric, (_, checks) in self.checks.items():
            said = verdict(checks) if checks is not None else "not measured"
            if said in ("no signal", "topic only"):
                for key in self.keys[metric]:
                    marks.setdefault(key, []).append(said)
        for key in self.constant:
            marks.setdefault(key, []).append("constant")
        for key in self.near_constant:
            if "no signal" not in marks.setdefault(key, []):
                marks[key].append("no signal")
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
            "judges": {metric: _judge_json(name, checks) for metric, (name, checks) in self.checks.items()},
            "constant_columns": {key: {"value": v, "rows": n} for key, (v, n) in self.constant.items()},
            "near_constant_columns": {
                key: {"value": v, "rows": k, "scored_rows": n}
                for key, (v, k, n) in self.near_constant.items()
            },
        }

    def markdown(self, columns: Mapping[str, str]) -> str:
        """results.md's "Judges on control pairs" section (the constant columns included)."""
        pairs = self.controls.pairs
        n = len(pairs.sentences)
        counts = ", ".join(f"{kind} {sum(p is not None for p in pairs.premises(kind))}" for kind in KINDS)
        lines = [
            "## Judges on control pairs",
            "",
            f"Before scoring, each judge scored {n} gold sentences of this run's rows (at most "
            f"{CONTROL_PAIRS}, one sentence of ≥ {MIN_WORDS} words per row, drawn with seed "
            f"{self.controls.seed}) as answers to their own question: against their own gold answer "
            "(supported) and against three kinds of unsupported premise: another question's gold answer "
            "(other_question, easy: another topic), the nearest pool question's answer (neighbour: the same "
            "topic, other facts) and the own gold answer with one number, flag, version, name or code span "
            f"of the sentence swapped for another from the pool (swapped_fact). Pairs per kind: {counts}. "
            "AUC: "
            "Mann–Whitney over the judge's score, ties counted half. A judge has no signal when, on "
            f"other_question, its AUC < {MIN_AUC} or its supported accept rate exceeds the unsupported one "
            f"by less than {MIN_ACCEPT_GAP}; it is topic only when it has signal there but not on a hard "
            "kind. Its columns are marked so in the tables above.",
            "",
        ]
        if self.checks:
            head = " | ".join(f"AUC, {kind}" for kind in KINDS)
            accepts = " | ".join(f"accepted, {kind}" for kind in KINDS)
            lines += [
                f"| Judge | {head} | accepted, supported | {accepts} | pairs judged | verdict |",
                "|---|" + "---|" * (2 * len(KINDS) + 3),
            ]
            why = "the run stopped first" if n else f"fewer than {MIN_SIDE} rows with such a sentence"
            for name, checks in self.checks.values():
                if checks is None:
                    lines.append(f"| {name} |" + " |" * (2 * len(KINDS) + 1) + f" 0 | not measured ({why}) |")
                    continue
                easy = checks[KINDS[0]]
                aucs = " | ".join(_number(checks[kind].auc) for kind in KINDS)
                rates = " | ".join(_number(checks[kind].accept_unsupported) for kind in KINDS)
                judged = " + ".join(str(checks[kind].n_unsupported) for kind in KINDS)
                lines.append(
                    f"| {name} | {aucs} | {_number(easy.accept_supported)} | {rates} "
                    f"| {easy.n_supported} + ({judged}) | {verdict(checks)} |"
                )
        else:
            lines.append("No metric of this run is a judge.")
        lines += ["", f"Constant columns (one value on every row of every variant): {len(self.constant)}."]
        for key, (value, rows) in self.constant.items():
            lines.append(f"- {column_name(key, columns)}: {value:.4f} on all {rows} rows")
        share = f"{NEAR_CONSTANT:.0%}"
        lines += [
            "",
            f"Columns with one value on at least {share} of their rows (marked no signal): "
            f"{len(self.near_constant)}.",
        ]
        for key, (value, rows, scored) in self.near_constant.items():
            lines.append(f"- {column_name(key, columns)}: {value:.4f} on {rows} of {scored} rows")
        return "\n".join(lines) + "\n"


def _judge_json(name: str, checks: Mapping[str, JudgeCheck] | None) -> dict[str, Any]:
    """One judge's entry of ``judges.json``: its verdict, the easy kind's figures at the top (as before the
    hard kinds), and every kind's figures under ``kinds``."""
    if checks is None:
        return {"column": name, "verdict": "not measured"}
    return {
        "column": name,
        **checks[KINDS[0]].as_json(),
        "verdict": verdict(checks),
        "kinds": {kind: check.as_json() for kind, check in checks.items()},
    }


def _nan(value: float | None) -> float:
    return float("nan") if value is None else value


def _or_none(value: float) -> float | None:
    """JSON's null for NaN (not judged: over the judge's input limit)."""
    return None if math.isnan(value) else value


def _number(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3f}"
