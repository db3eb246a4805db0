"""BERTScore F1 (bert-score; the paper's: roberta-large, layer 17, idf off, no rescaling) as a registry
entry."""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar

from graphctx.metrics.choice import EncoderChoice, choose_encoder
from graphctx.metrics.entry_defaults import ByteCounter, library_versions
from graphctx.metrics.registry import MetricEntry, RowScorer, device_of, per_row_scores, stand_in_tag
from graphctx.model_use import ModelUse, model_identity, model_use
from graphctx.paper import BERTSCORE, BERTSCORE_LAYER

KEY = "evaluation.metrics.bertscore"


class BertScore(MetricEntry):
    """BERTScore F1 of each answer against its gold answer, with the encoder :func:`choose_encoder`
    resolves."""

    name = "bertscore"
    columns: ClassVar[dict[str, str]] = {"bertscore_f1": "BERTScore"}
    column_rank = 10
    plan_rank = 20
    title = "BERTScore"
    sections = ("bertscore",)
    libraries = ("bert-score", "torch", "transformers")
    paper_metric = True
    paper_columns: ClassVar[dict[str, tuple[str, str]]] = {"bertscore_f1": ("bertscore", "BERTScore")}

    @cached_property
    def encoder(self) -> EncoderChoice:
        return choose_encoder(self.settings.bertscore)

    @cached_property
    def use(self) -> ModelUse:
        return model_use(f"{KEY}.model", self.settings.bertscore.model, BERTSCORE)

    @property
    def label(self) -> str:
        return self.encoder.label

    @property
    def rescaled(self) -> bool:
        return self.settings.bertscore.baseline_path is not None

    def fingerprint(self) -> dict[str, Any]:
        encoder = self.encoder
        return {
            "resolved": {"model": encoder.model, "layer": encoder.layer, "label": encoder.label},
            "model": model_identity(encoder.model),  # what the model is, not where it lies
            "baseline": model_identity(self.settings.bertscore.baseline_path),
            "libraries": library_versions(self.libraries),
        }

    def models(self) -> list[ModelUse]:
        return [self.use]

    def stand_in(self) -> dict[str, Any] | None:
        if not self.encoder.label:  # another model, another layer, or rescaled
            return None
        paper = f"{BERTSCORE.name}@L{BERTSCORE_LAYER}"
        return {"stage": "BERTScore", "key": KEY, "configured": self.encoder.label, "paper": paper}

    def stand_in_key(self) -> str:
        return KEY

    def plan_json(self) -> dict[str, Any]:
        encoder, settings = self.encoder, self.settings.bertscore
        return {
            "model": encoder.model,
            "available": self.use.available,
            "layer": encoder.layer,
            "layer_from": encoder.layer_from,
            "idf": False,
            "rescale_with_baseline": self.rescaled,
            "baseline_path": settings.baseline_path,
            "device": device_of(settings.device),
            "paper": not encoder.label,
            "label": encoder.label,
        }

    def plan_lines(self) -> list[str]:
        encoder = self.encoder
        return [
            f"  BERTScore    {encoder.model} [{self.use.available}] layer {encoder.layer} "
            f"({encoder.layer_from}), idf off, rescaled {self.rescaled}, "
            f"{device_of(self.settings.bertscore.device)}"
        ]

    def description(self) -> str:
        encoder = self.encoder
        return (
            f"{encoder.model} layer {encoder.layer} ({encoder.layer_from}), idf off, "
            f"baseline rescaling {'on' if self.rescaled else 'off'}" + stand_in_tag(encoder.label)
        )

    def memory_stage(self) -> str | None:
        return "rouge+bertscore"  # ROUGE scores on the CPU in the same stage

    def memory_bytes(self, counter: ByteCounter) -> float | None:
        return counter.weight_bytes(self.settings.bertscore.model, 4)

    def callback_bytes(self, counter: ByteCounter, on_cuda: bool) -> list[float | None]:
        return [counter.weight_bytes(self.settings.bertscore.model, 4)] if on_cuda else []

    def scorer(self, device, cache_dir, extractor, gold_store) -> RowScorer:
        from graphctx.metrics.bertscore import BertScoreF1, build_scorer

        encoder = build_scorer(self.settings.bertscore, device)

        def score(questions, generated, gold, premises):
            metric = BertScoreF1(self.settings.bertscore, scorer=encoder, sync_on_compute=False)
            metric.update(generated, gold)
            return per_row_scores(metric)

        return score
