"""During training: answer a fixed validation subset every N validation runs and score the answers.

Logged per run: ``val_generation/<metric>`` scalars (macro means), a W&B table (question, context,
generated, gold, per-row scores) when a ``WandbLogger`` is attached, and the same rows as
``<log_dir>/val_generation/step-<global_step>.csv``. The model is the training model itself (the 4-bit base
with the adapter applied on the fly): it is switched to eval mode and SDPA attention for decoding, and put
back exactly as it was, with no autograd graph kept. When the LLM triplet extractor is the generation model
(``knowledge.llm_model: ""``), it is this model too, with its adapter disabled.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.loggers import WandbLogger

from graphctx.cache import atomic_path
from graphctx.data import load_qa_dataset
from graphctx.errors import ConfigError
from graphctx.evaluation.matrix.scorer import Scorer
from graphctx.knowledge.llm import GenerationModel
from graphctx.metrics.registry import entries_named
from graphctx.model_use import model_identity
from graphctx.pipeline.answerer import Answerer, AnswerSettings
from graphctx.pipeline.contexts import RetrievedContext
from graphctx.pipeline.run_config import RunConfig
from graphctx.prompts import VARIANTS, ModelKind

TABLE_COLUMNS = ("id", "question", "context", "generated", "gold")


@contextlib.contextmanager
def decoding(pl_module: L.LightningModule, adapter: bool, compiled: bool = False) -> Iterator[None]:
    """The training model ready to decode: eval mode, SDPA attention, eager blocks (``compiled``: its blocks
    were compiled for training, ``model.spec.compile``), no autograd graph, its adapter on or off; on exit
    it is put back exactly as it was."""
    model = pl_module.model
    base = model.get_base_model()
    attention, was_training = base.config._attn_implementation, model.training
    model.eval()
    if attention != "sdpa":  # the padding-free training kernel takes no padded batches or KV cache
        base.set_attn_implementation("sdpa")
    adapter_off = contextlib.nullcontext() if adapter else model.disable_adapter()
    # compiled training blocks would retrace for every KV-cache shape: run eagerly
    stance = "force_eager" if compiled else "default"
    try:
        with adapter_off, torch.compiler.set_stance(stance), torch.no_grad():
            yield
    finally:
        if attention != "sdpa":
            base.set_attn_implementation(attention)
        model.train(was_training)


@dataclass
class TrainingModel:
    """The training model as the :class:`Answerer`'s model source (nothing is loaded): ``adapter`` is it
    as it trains, ``base`` is it with its adapter disabled (:func:`decoding` around every use)."""

    pl_module: L.LightningModule
    tokenizer: Any
    source: str
    """Its base's ``model.spec.source`` (what the LLM extractor's cache key names it by)."""
    compiled: bool = False
    """Its blocks were compiled for training (``model.spec.compile``)."""

    def load(self, kind: ModelKind) -> GenerationModel:
        session = functools.partial(
            decoding, self.pl_module, adapter=kind == "adapter", compiled=self.compiled
        )
        identity = model_identity(self.source)
        return GenerationModel(self.pl_module.model, self.tokenizer, session, source_identity=identity)


class ValidationGeneration(L.Callback):
    """Generate and score ``evaluation.callback_examples`` validation questions with the callback variant."""

    def __init__(self, config: RunConfig) -> None:
        evaluation = config.evaluation
        if evaluation.callback_variant not in VARIANTS:
            raise ConfigError(
                f"evaluation.callback_variant: unknown variant {evaluation.callback_variant!r}; "
                f"choose from {list(VARIANTS)}"
            )
        self.entries = entries_named(
            config.metric_entries, evaluation.callback_metrics, "evaluation.callback_metrics"
        )
        self.config = config
        self.settings = evaluation
        self.variant = VARIANTS[evaluation.callback_variant]
        self.validations = 0
        self.rows: list[dict[str, Any]] | None = None
        self.contexts: list[RetrievedContext] = []
        self.scorer: Scorer | None = None
        self.answerer: Answerer | None = None

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self.validations += 1
        every = self.settings.callback_every_n_validations
        if every <= 0 or self.validations % every:
            return
        # every rank: Trainer.log_dir broadcasts rank 0's folder (a collective)
        folder = Path(trainer.log_dir or trainer.default_root_dir) / "val_generation"
        if trainer.is_global_zero:
            rows, scores = self.generate_and_score(trainer, pl_module)
            for key in scores[0] if scores else []:
                values = [s[key] for s in scores if not math.isnan(s[key])]
                if values:
                    pl_module.log(f"val_generation/{key}", sum(values) / len(values), rank_zero_only=True)
            self.write_rows(trainer, folder, rows, scores)
        trainer.strategy.barrier("val_generation")  # other ranks wait here instead of training ahead

    # ---- data ----------------------------------------------------------------------------------------
    def prepare(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """The fixed subset (first ``callback_examples`` validation questions by id) and their contexts;
        the LLM extractor, when it is the generation model, is ``pl_module``'s model without its adapter."""
        config, tokenizer = self.config, trainer.datamodule.tokenizer
        dataset = load_qa_dataset(config.data.dataset, config.cache_dir, tokenizer)
        validation = sorted(dataset["validation"], key=lambda row: int(row["id"]))
        self.rows = validation[: self.settings.callback_examples]
        models = TrainingModel(pl_module, tokenizer, config.model.spec.source, config.model.spec.compile)
        # generate, whatever generation.backend: continuous batching would size its paged cache from the
        # memory training holds
        settings = AnswerSettings.of(config)
        settings = replace(settings, generation=replace(settings.generation, backend="generate"))
        self.answerer = Answerer(settings, dataset["train"], tokenizer, models)
        builder = self.answerer.context_builder()  # kept here: its extractor also scores the facts
        questions = [row["question"] for row in self.rows]
        self.contexts = builder.for_variants([self.variant], questions)[self.variant.name]
        extractor = None  # the triplet fact score's; the knowledge stage's when the variant has built it
        if self.variant.knowledge:
            extractor = builder.enhancer.extractor
        elif any(entry.needs_extractor() for entry in self.entries):
            extractor = self.answerer.triplet_extractor()
        self.scorer = Scorer(self.entries, extractor, config.cache_dir, device=self.settings.callback_device)

    # ---- generation and scores -----------------------------------------------------------------------
    def generate_and_score(
        self, trainer: L.Trainer, pl_module: L.LightningModule
    ) -> tuple[list[dict[str, Any]], list[dict[str, float]]]:
        """Answers and per-row scores of the subset; the model is restored to its previous state."""
        if self.rows is None or self.answerer is None:
            self.prepare(trainer, pl_module)
        questions = [row["question"] for row in self.rows]
        prompts = self.answerer.prompts(self.variant, questions, self.contexts)
        answers = self.answerer.answer_prompts(self.variant, prompts)
        generated = [answer.text for answer in answers]
        contexts = [answer.prompt.context for answer in answers]  # as shown, parts dropped to fit gone
        scores = self.scorer.score(
            [row["question"] for row in self.rows],
            generated,
            [row["answer"] for row in self.rows],
            [context or None for context in contexts],
            [[p.judged for p in a.prompt.passages] if a.prompt.citations else None for a in answers],
        )
        rows = [
            {
                "id": row["id"],
                "question": row["question"],
                "context": context,
                "generated": text,
                "gold": row["answer"],
            }
            for row, context, text in zip(self.rows, contexts, generated, strict=True)
        ]
        return rows, scores

    # ---- outputs -------------------------------------------------------------------------------------
    def write_rows(
        self, trainer: L.Trainer, folder: Path, rows: list[dict[str, Any]], scores: list[dict[str, float]]
    ) -> Path:
        """The CSV of this run's rows and scores in ``folder`` (atomically), and the W&B table."""
        keys = sorted({key for score in scores for key in score})
        columns = [*TABLE_COLUMNS, *keys]
        data = [
            [row[c] for c in TABLE_COLUMNS] + [score[k] for k in keys]
            for row, score in zip(rows, scores, strict=True)
        ]
        target = folder / f"step-{trainer.global_step:07d}.csv"
        with atomic_path(target) as tmp, open(tmp, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(columns)
            writer.writerows(data)
        for logger in trainer.loggers:
            if isinstance(logger, WandbLogger):
                logger.log_table(
                    key="val_generation/samples", columns=columns, data=data, step=trainer.global_step
                )
        return target


def validation_callback(config: RunConfig) -> ValidationGeneration | None:
    """The callback of a run config, or None when ``evaluation.callback_every_n_validations`` is 0."""
    if config.evaluation.callback_every_n_validations <= 0:
        return None
    return ValidationGeneration(config)
