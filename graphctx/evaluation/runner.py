"""The evaluation run behind ``evaluate.py``: contexts → answers → scores → results table, all resumable.

Layout of ``evaluation.output_dir``::

    predictions/<variant>.jsonl   one line per answered question (prompt, context, answer, gold, hits)
    predictions/<variant>.meta.json   the settings the answers depend on (a rerun with others is refused)
    scores/<variant>.jsonl        one line of per-row metric scores per answered question
    results.md, results.csv       the table (means, 95% intervals, paired tests vs the best baseline)

A rerun skips every batch whose rows are already in the JSONL files. Answers are decoded in a fixed plan of
length-sorted batches over the whole split, and scores in fixed chunks of rows, so a resumed run computes
exactly what an uninterrupted one would.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from transformers import PreTrainedModel

from graphctx.cache import file_digest, fingerprint, write_json_atomic
from graphctx.errors import ConfigError
from graphctx.evaluation.contexts import ContextBuilder, RetrievedContext
from graphctx.evaluation.pipeline import PipelineConfig
from graphctx.evaluation.plan import Plan, check_models
from graphctx.evaluation.pool import load_config_dataset
from graphctx.evaluation.records import RecordFile, check_unique_ids
from graphctx.evaluation.scoring import Scorer
from graphctx.evaluation.settings import EvaluationSettings
from graphctx.evaluation.table import ResultsTable, VariantScores, build_table, write_table
from graphctx.evaluation.tracking import log_results
from graphctx.generation import Answer, Generator, length_sorted_batches, load_generator
from graphctx.knowledge.llm import GenerationModel
from graphctx.model import load_tokenizer
from graphctx.prompts import EncodedPrompt, Variant, build_prompt, encode_prompt, get_variants

ANSWER_FORMAT = 2
"""Bump when the same settings start making other answers (prompt encoding, the weights decoded, stopping);
part of the fingerprint, so a rerun never mixes answers made the old and the new way. 2: the paper's exact
prompt string, NF4-dequantised merge, stop strings for the base variants."""

SCORE_CHUNK_ROWS = 64
"""Rows scored together (one resumable unit of scoring)."""


def adapter_dir_of(config: PipelineConfig) -> Path:
    """``evaluation.adapter``, else ``model.export.adapter_dir``, else ``<default_root_dir>/adapter``."""
    chosen = config.evaluation.adapter or config.model.export.adapter_dir
    return Path(chosen) if chosen else config.root_dir / "adapter"


SPEED_ONLY: dict[str, set[str]] = {
    "model": {
        "cache_dir",
        "attention",
        "gradient_checkpointing",
        "checkpoint_fraction",
        "compile",
        "loss_chunk_tokens",
    },
    "generation": {"batch_size", "device", "static_cache", "cache_bucket_tokens"},
    "retrieval": {
        "device",
        "embedding_batch_size",
        "query_batch_size",
        "similarity_chunk_size",
        "max_batch_slots",
        "shared_component_nodes",
    },
    "knowledge": {"batch_size", "device", "cache_dir"},
}
"""Settings that change how fast answers are made (or only training), not which answers: left out of the
fingerprint that guards a resumed run."""


def _settings(settings: Any, leave_out: set[str]) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(settings).items() if k not in leave_out}


def _adapter_digest(adapter_dir: Path) -> str:
    weights = sorted(adapter_dir.glob("adapter_model.*"))
    if not weights:
        raise ConfigError(f"evaluation.adapter: no adapter weights (adapter_model.*) in {adapter_dir}")
    return file_digest(weights[0])


def _stderr_logger() -> Callable[[str], None]:
    """Progress lines on stderr, stamped with the seconds since the run started."""
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {message}", file=sys.stderr, flush=True)

    return log


class EvaluationRun:
    """One evaluation of a config: call :meth:`run` (or the steps one by one)."""

    def __init__(
        self,
        config: PipelineConfig,
        variants: Sequence[str] | None = None,
        limit: int | None = None,
        output_dir: str | Path | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.settings: EvaluationSettings = config.evaluation
        self.variants = get_variants(variants if variants is not None else self.settings.variants)
        self.limit = limit if limit is not None else self.settings.limit
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"evaluation.limit (--limit): must be at least 1, got {self.limit}")
        self.output_dir = Path(output_dir or self.settings.output_dir or config.root_dir / "eval")
        self.cache_dir = config.data.cache_dir
        self.log = log or _stderr_logger()
        self.plan = Plan(config)
        self.tokenizer = load_tokenizer(config.model.spec)
        self.adapter_dir = adapter_dir_of(config)

    # ---- data and contexts ---------------------------------------------------------------------------
    def load_rows(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(evaluated rows sorted by id and cut to ``limit``, the training pool)."""
        dataset = load_config_dataset(self.config)
        split = self.settings.split
        if split not in dataset:
            raise ConfigError(f"evaluation.split: no split {split!r}; the dataset has {list(dataset)}")
        rows = sorted(dataset[split], key=lambda row: int(row["id"]))
        check_unique_ids(rows, f"{self.config.data.dataset.source} (split {split!r})")
        rows = rows[: self.limit]
        if not rows:
            raise ConfigError(f"evaluation.split: split {split!r} of {self.config.path} is empty")
        return rows, list(dataset["train"])

    # ---- file layout and settings guard --------------------------------------------------------------
    def predictions_file(self, variant: Variant) -> Path:
        return self.output_dir / "predictions" / f"{variant.name}.jsonl"

    def scores_file(self, variant: Variant) -> Path:
        return self.output_dir / "scores" / f"{variant.name}.jsonl"

    def prediction_fingerprint(self, variant: Variant) -> dict[str, Any]:
        """Everything a variant's answers depend on; speed-only and training-only knobs are left out, so
        a run can resume on another device or with another batch size."""
        parts: dict[str, Any] = {
            "answer_format": ANSWER_FORMAT,
            "variant": dataclasses.asdict(variant),
            "stop_strings": list(variant.stop_strings),
            "model": _settings(self.config.model.spec, SPEED_ONLY["model"]),
            "template": dataclasses.asdict(self.config.data.template),
            "dataset": dataclasses.asdict(self.config.data.dataset),
            "split": self.settings.split,
            "generation": _settings(self.settings.generation, SPEED_ONLY["generation"]),
        }
        if variant.model == "adapter":
            parts["adapter"] = _adapter_digest(self.adapter_dir)
        if variant.retrieval != "none":
            parts["retrieval"] = _settings(self.config.retrieval, SPEED_ONLY["retrieval"])
            parts["knowledge"] = _settings(self.config.knowledge, SPEED_ONLY["knowledge"])
        return parts

    def check_settings(self, variant: Variant, overwrite: bool) -> None:
        """Refuse to extend predictions made with other settings (or delete them when ``overwrite``).

        A meta file without a single prediction (a run that failed before its first answer, e.g. loading the
        adapter) binds nothing: it is replaced."""
        parts = self.prediction_fingerprint(variant)
        meta = {"fingerprint": fingerprint(parts), "settings": parts}
        meta_file = self.predictions_file(variant).with_suffix(".meta.json")
        if meta_file.is_file() and RecordFile(self.predictions_file(variant)).records:
            previous = json.loads(meta_file.read_text())["fingerprint"]
            if previous == meta["fingerprint"]:
                return
            if not overwrite:
                raise ConfigError(
                    f"{meta_file}: the predictions of {variant.name} were made with other settings; "
                    "use another evaluation.output_dir or pass --overwrite"
                )
        for path in (self.predictions_file(variant), self.scores_file(variant)):
            path.unlink(missing_ok=True)
        write_json_atomic(meta_file, meta)

    # ---- generation ----------------------------------------------------------------------------------
    def load_model(self, kind: str) -> PreTrainedModel:
        """The generation model of ``kind``: ``base``, or ``adapter`` (the base with the trained adapter)."""
        adapter = self.adapter_dir if kind == "adapter" else None
        self.log(f"loading the {kind} model" + (f" with the adapter {adapter}" if adapter else ""))
        return load_generator(self.config.model.spec, adapter, self.settings.generation)

    def generate(
        self,
        rows: Sequence[dict[str, Any]],
        contexts: dict[str, list[RetrievedContext]],
        base: PreTrainedModel | None = None,
    ) -> None:
        """Answer every row for every variant, loading each model (base, base+adapter) once; ``base`` is the
        base model when it is already loaded (as the LLM extractor), used instead of a second copy."""
        ids = {int(row["id"]) for row in rows}
        for kind in ("base", "adapter"):
            pending = [
                v
                for v in self.variants
                if v.model == kind and ids - RecordFile(self.predictions_file(v)).done
            ]
            if not pending:
                continue
            model = base if kind == "base" and base is not None else self.load_model(kind)
            generator = Generator(model, self.tokenizer, self.settings.generation)
            for variant in pending:
                self.generate_variant(generator, variant, rows, contexts[variant.name])
            del model, generator

    def generate_variant(
        self,
        generator: Generator,
        variant: Variant,
        rows: Sequence[dict[str, Any]],
        contexts: Sequence[RetrievedContext],
    ) -> None:
        """Answer the rows of ``variant`` missing from its JSONL, batch by batch (each batch one append)."""
        records = RecordFile(self.predictions_file(variant))
        template = self.config.data.template
        prompts = [
            build_prompt(variant, row["question"], retrieved.pairs, retrieved.sentences, template)
            for row, retrieved in zip(rows, contexts, strict=True)
        ]
        max_tokens = self.settings.generation.max_prompt_tokens
        encoded = [encode_prompt(self.tokenizer, prompt, max_tokens) for prompt in prompts]
        batches = length_sorted_batches([len(e.ids) for e in encoded], self.settings.generation.batch_size)
        todo = [[i for i in batch if int(rows[i]["id"]) not in records.done] for batch in batches]
        todo = [batch for batch in todo if batch]
        for number, batch in enumerate(todo, start=1):
            prompt_ids = [encoded[i].ids for i in batch]
            answers = generator.generate_ids(prompt_ids, stop_strings=variant.stop_strings)
            records.append(
                self._prediction(variant, rows[i], contexts[i], encoded[i], answer)
                for i, answer in zip(batch, answers, strict=True)
            )
            self.log(f"{variant.name}: batch {number}/{len(todo)} ({len(records.done)}/{len(rows)} answered)")

    @staticmethod
    def _prediction(
        variant: Variant,
        row: dict[str, Any],
        retrieved: RetrievedContext,
        encoded: EncodedPrompt,
        answer: Answer,
    ) -> dict[str, Any]:
        """One JSONL line; ``context`` and ``prompt`` as the model saw them (parts dropped to fit gone)."""
        return {
            "id": int(row["id"]),
            "variant": variant.name,
            "question": row["question"],
            "context": encoded.prompt.context,
            "prompt": encoded.prompt.text,
            "generated": answer.text,
            "gold": row["answer"],
            "retrieved_ids": [hit.id for hit in retrieved.hits],
            "retrieval_fallback": [hit.fallback for hit in retrieved.hits],
            "prompt_tokens": len(encoded.ids),
            "prompt_truncated": encoded.truncated,
            "prompt_over_limit": encoded.over_limit,
            "new_tokens": len(answer.token_ids),
            "stop": answer.stop,
        }

    # ---- scoring -------------------------------------------------------------------------------------
    def score(self, rows: Sequence[dict[str, Any]], extractor_source: ContextBuilder) -> list[VariantScores]:
        """Score every answered row not yet scored, in fixed chunks of rows; return all scores per variant."""
        ids = [int(row["id"]) for row in rows]
        scorer: Scorer | None = None
        results = []
        for variant in self.variants:
            predictions = RecordFile(self.predictions_file(variant)).records
            scores = RecordFile(self.scores_file(variant))
            for start in range(0, len(ids), SCORE_CHUNK_ROWS):
                chunk = [i for i in ids[start : start + SCORE_CHUNK_ROWS] if i in predictions]
                if not chunk or all(i in scores.done for i in chunk):
                    continue
                if scorer is None:
                    self.log("loading the metrics (BERTScore encoder, AutoAIS judge, extractors)")
                    scorer = Scorer(
                        self.settings.metrics,
                        extractor_source.enhancer.extractor,
                        self.cache_dir,
                        fact_label=self.plan.fact_label,
                    )
                chunk_rows = [predictions[i] for i in chunk]
                values = scorer.score(
                    [r["question"] for r in chunk_rows],
                    [r["generated"] for r in chunk_rows],
                    [r["gold"] for r in chunk_rows],
                    [r["context"] or None for r in chunk_rows],
                )
                scores.append({"id": i, **v} for i, v in zip(chunk, values, strict=True))
                self.log(f"{variant.name}: scored {len(scores.done)}/{len(predictions)}")
            scored = [i for i in ids if i in scores.records]
            keys = sorted({key for i in scored for key in scores.records[i] if key != "id"})
            results.append(
                VariantScores(
                    variant,
                    scored,
                    {
                        key: np.array(
                            [np.nan if (v := scores.records[i].get(key)) is None else v for i in scored],
                            dtype=float,
                        )
                        for key in keys
                    },
                    prompts_truncated=sum(bool(predictions[i].get("prompt_truncated")) for i in scored),
                    prompts_over_limit=sum(bool(predictions[i].get("prompt_over_limit")) for i in scored),
                )
            )
        return results

    # ---- the whole run -------------------------------------------------------------------------------
    def run(self, overwrite: bool = False) -> ResultsTable:
        """Contexts, answers, scores, table (Markdown + CSV) and W&B logging; returns the table."""
        print(self.plan.to_text(), file=sys.stderr, flush=True)
        check_models(self.plan, "evaluate", self.variants)
        for variant in self.variants:
            self.check_settings(variant, overwrite)
        rows, pool = self.load_rows()
        self.log(f"{len(rows)} {self.settings.split} questions, {len(self.variants)} variants")
        # the LLM extractor is the base generation model: loaded once, it extracts (contexts, fact score) and
        # answers the base variants
        base = self.load_model("base") if self.config.knowledge.uses_generation_model else None
        builder = ContextBuilder(
            pool,
            self.config.retrieval,
            self.config.knowledge,
            self.cache_dir,
            generation_model=GenerationModel(base, self.tokenizer) if base is not None else None,
            tokenizer=self.tokenizer,
        )
        contexts = builder.for_variants(self.variants, [row["question"] for row in rows])
        self.log("contexts ready")
        self.generate(rows, contexts, base)
        results = self.score(rows, builder)
        table = build_table(
            results, self.settings.bootstrap_samples, self.settings.seed, self.plan.model_descriptions()
        )
        paths = write_table(table, self.output_dir)
        self.log(f"results: {paths['markdown']} and {paths['csv']}")
        files = {v.name: (self.predictions_file(v), self.scores_file(v)) for v in self.variants}
        log_results(self.settings, self.config.path, table, files, self.output_dir, self.plan.to_json())
        return table
