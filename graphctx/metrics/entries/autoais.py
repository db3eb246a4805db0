"""AutoAIS (Bohnet et al., 2022; the paper's judge: TRUE's T5-XXL NLI) as a registry entry: scored only on
rows whose prompt had a context to attribute to."""

from __future__ import annotations

import math
from functools import cached_property
from typing import Any, ClassVar

from graphctx.metrics.choice import JudgeChoice, choose_judge
from graphctx.metrics.entry_defaults import ByteCounter, library_versions
from graphctx.metrics.registry import (
    OneModelEntry,
    RowScorer,
    device_of,
    per_row_scores,
    premise_rows,
    stand_in_tag,
)
from graphctx.model_use import ModelUse, model_identity, model_use
from graphctx.paper import AUTOAIS

LIMIT_POLICY = (
    "the whole premise is judged; rows over the limit are counted (autoais_over_limit) and left out, "
    "never cut"
)


class AutoAISEntry(OneModelEntry):
    """AutoAIS of each answer against the context it was generated from (NaN for rows without one)."""

    name = "autoais"
    columns: ClassVar[dict[str, str]] = {"autoais": "AutoAIS (whole context)"}
    column_rank = 40
    plan_rank = 30
    title = "AutoAIS (whole context)"
    sections = ("autoais",)
    libraries = ("torch", "transformers", "gguf")
    premise = True
    paper_metric = True
    judge_keys = ("autoais", "autoais_soft")

    @cached_property
    def judge(self) -> JudgeChoice:
        return choose_judge(self.settings.autoais)

    @cached_property
    def use(self) -> ModelUse:
        return model_use("evaluation.metrics.autoais.model", self.settings.autoais.model, AUTOAIS)

    @property
    def label(self) -> str:
        return self.judge.label

    def fingerprint(self) -> dict[str, Any]:
        judge = self.judge
        return {
            "resolved": {
                "protocol": judge.protocol,
                "max_input_tokens": judge.max_input_tokens,
                "label": judge.label,
            },
            "model": model_identity(judge.model),
            "libraries": library_versions(self.libraries),
        }

    def plan_json(self) -> dict[str, Any]:
        judge, settings = self.judge, self.settings.autoais
        return {
            "model": judge.model,
            "available": self.use.available,
            "protocol": judge.protocol,
            "mode": settings.mode,
            "max_input_tokens": judge.max_input_tokens,
            "limit_from": judge.limit_from,
            "limit_policy": LIMIT_POLICY,
            "device": device_of(settings.device),
            "paper": not judge.label,
            "label": judge.label,
        }

    def plan_lines(self) -> list[str]:
        judge, settings = self.judge, self.settings.autoais
        limit = (
            f"≤ {judge.max_input_tokens} tokens ({judge.limit_from}), "
            if judge.max_input_tokens
            else f"input limit = {judge.limit_from}, "
        )
        return [
            f"  AutoAIS      {judge.model} [{self.use.available}] {judge.protocol}, {settings.mode} mode, "
            f"{limit}whole premise, {device_of(settings.device)}"
        ]

    def description(self) -> str:
        judge = self.judge
        return (
            f"{judge.model} ({judge.protocol}, {self.settings.autoais.mode} mode), whole premise, inputs "
            f"over {judge.max_input_tokens or judge.limit_from} tokens counted, not judged"
            + stand_in_tag(judge.label)
        )

    def describe(self, key: str, value: float) -> str:
        if key.startswith("autoais_over_limit"):  # a flag, not a score: 1 = not judged
            return "over the judge's input limit: not judged" if value else "within the judge's input limit"
        if math.isnan(value):
            return "not judged: the context is longer than the judge accepts"
        if key.startswith("autoais_soft"):
            return f"p(attributable) = {value:.3f}"
        if self.settings.autoais.mode == "sentence":
            return f"{value:.0%} of the answer's sentences are entailed by the context"
        return "attributable to the context" if value == 1 else "not attributable to the context"

    def memory_bytes(self, counter: ByteCounter) -> float | None:
        return counter.weight_bytes(self.settings.autoais.model, 2)

    def callback_bytes(self, counter: ByteCounter, on_cuda: bool) -> list[float | None]:
        return [counter.weight_bytes(self.settings.autoais.model, 2)] if on_cuda else []

    def scorer(self, device, cache_dir, extractor, gold_store) -> RowScorer:
        from graphctx.metrics.autoais import AutoAIS
        from graphctx.metrics.judges import build_judge

        judge = build_judge(self.settings.autoais, cache_dir, device)
        probe = AutoAIS(judge, self.settings.autoais, sync_on_compute=False)
        keys = [probe.output_key(name) for name in probe.score_states]

        def score(questions, generated, gold, premises):
            metric = AutoAIS(judge, self.settings.autoais, sync_on_compute=False)
            metric.update(questions, generated, premises)
            return per_row_scores(metric)

        return premise_rows(score, keys)
