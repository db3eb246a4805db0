"""The evaluation run behind ``evaluate.py``: contexts → answers → scores → results table, all resumable.

Layout of ``evaluation.output_dir``::

    predictions/<variant>.jsonl   one line per answered question (prompt, context, answer, gold, hits)
    predictions/<variant>.meta.json   the settings the answers depend on (a rerun with others is refused)
    scores/<variant>.jsonl        one line of per-row metric scores per answered question
    results.md, results.csv       the table (means, 95% intervals, paired tests vs the best baseline)
    timings.json                  the last run's seconds per stage, per process (``stage_seconds``)
    {predictions,scores}/shards/  while a multi-process run goes on: one file per variant and rank

Answers are decoded, and scored, in a fixed plan of length-sorted batches over the whole split
(:mod:`graphctx.evaluation.shards`); a rerun skips every batch whose rows are already written, so a resumed
run computes exactly what an uninterrupted one would, and so does a run on any number of processes. The
contexts are built once, shared by the ranks (:class:`~graphctx.evaluation.contexts.ContextBuilder`): rank
0 builds or reads the pool index and the KG store first, then each rank retrieves its share of the
questions (through ``predict_hits``) and enhances its share (or reads it from the knowledge cache), and the
shares are gathered so that every rank has every context. The pending batches are dealt over the ranks,
each answers and scores its own into its shards, and rank 0 merges them into the files a single process
writes, rows in plan order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
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
from graphctx.evaluation.processes import Preempted, Processes, StopRequest
from graphctx.evaluation.records import RecordFile, check_unique_ids
from graphctx.evaluation.scoring import Scorer
from graphctx.evaluation.settings import EvaluationSettings
from graphctx.evaluation.shards import (
    Unit,
    balance,
    check_shards,
    merge_shards,
    shard_path,
    write_in_order,
)
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
        "liger",
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


def _stderr_logger(processes: Processes) -> Callable[[str], None]:
    """Progress lines on stderr, stamped with the seconds since the run started (and the rank, if many)."""
    started = time.perf_counter()
    rank = f" rank {processes.rank}/{processes.world_size}" if processes.world_size > 1 else ""

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s{rank}] {message}", file=sys.stderr, flush=True)

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
        processes: Processes | None = None,
        stop: StopRequest | None = None,
    ) -> None:
        """``processes``: this process's place in a multi-process run (:func:`launch_processes`); ``stop``:
        the stop request to honour after each batch (default: one installed now)."""
        self.config = config
        self.settings: EvaluationSettings = config.evaluation
        self.variants = get_variants(variants if variants is not None else self.settings.variants)
        self.limit = limit if limit is not None else self.settings.limit
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"evaluation.limit (--limit): must be at least 1, got {self.limit}")
        self.output_dir = Path(output_dir or self.settings.output_dir or config.root_dir / "eval")
        self.cache_dir = config.data.cache_dir
        self.processes = processes or Processes()
        self.log = log or _stderr_logger(self.processes)
        self.stop = stop or StopRequest()
        self.files: dict[str, VariantFiles] = {}
        self._fingerprints: dict[str, str] = {}
        self.timings: dict[str, float] = {}
        """Seconds this process spent per stage (contexts, answers, scores)."""
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

    def fingerprint(self, variant: Variant) -> str:
        """The hash of :meth:`prediction_fingerprint` (computed once)."""
        if variant.name not in self._fingerprints:
            self._fingerprints[variant.name] = fingerprint(self.prediction_fingerprint(variant))
        return self._fingerprints[variant.name]

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

    # ---- the work plan -------------------------------------------------------------------------------
    def encode(
        self, variant: Variant, rows: Sequence[dict[str, Any]], contexts: Sequence[RetrievedContext]
    ) -> list[EncodedPrompt]:
        """Each row's prompt for ``variant``, fitted to ``max_prompt_tokens``."""
        template = self.config.data.template
        max_tokens = self.settings.generation.max_prompt_tokens
        return [
            encode_prompt(
                self.tokenizer,
                build_prompt(variant, row["question"], retrieved.pairs, retrieved.sentences, template),
                max_tokens,
            )
            for row, retrieved in zip(rows, contexts, strict=True)
        ]

    def batches(self, encoded: Sequence[EncodedPrompt]) -> list[list[int]]:
        """The variant's fixed decoding plan over the whole split (independent of what is done already)."""
        return length_sorted_batches([len(e.ids) for e in encoded], self.settings.generation.batch_size)

    def pending_units(
        self, rows: Sequence[dict[str, Any]], encoded: dict[str, list[EncodedPrompt]]
    ) -> list[Unit]:
        """Every batch of every variant with a row still to answer or to score, in plan order."""
        units = []
        new_tokens = self.settings.generation.max_new_tokens
        for variant in self.variants:
            answered = self.files[variant.name].predictions.done
            scored = self.files[variant.name].scores.done
            lengths = [len(e.ids) for e in encoded[variant.name]]
            for number, batch in enumerate(self.batches(encoded[variant.name])):
                ids = {int(rows[i]["id"]) for i in batch}
                if ids <= answered and ids <= scored:
                    continue
                if ids <= answered:  # only scoring left: cost by the text the judge reads
                    cost = sum(lengths[i] for i in batch)
                else:
                    cost = len(batch) * (max(lengths[i] for i in batch) + new_tokens)
                units.append(Unit(variant.name, number, tuple(batch), cost))
        return units

    # ---- generation ----------------------------------------------------------------------------------
    def load_model(self, kind: str) -> PreTrainedModel:
        """The generation model of ``kind``: ``base``, or ``adapter`` (the base with the trained adapter)."""
        adapter = self.adapter_dir if kind == "adapter" else None
        self.log(f"loading the {kind} model" + (f" with the adapter {adapter}" if adapter else ""))
        return load_generator(
            self.config.model.spec, adapter, self.settings.generation, self.processes.device
        )

    def generate(
        self,
        rows: Sequence[dict[str, Any]],
        contexts: dict[str, list[RetrievedContext]],
        base: PreTrainedModel | None = None,
        units: Sequence[Unit] | None = None,
        encoded: dict[str, list[EncodedPrompt]] | None = None,
    ) -> None:
        """Answer the rows of ``units`` (default: every pending batch) not answered yet, loading each model
        (base, base+adapter) once; ``base`` is the base model when it is already loaded (as the LLM
        extractor), used instead of a second copy; ``encoded``: the prompts per variant, if already made.
        Stops early, after a whole batch, on a stop request."""
        if encoded is None:
            encoded = {v.name: self.encode(v, rows, contexts[v.name]) for v in self.variants}
        if units is None:
            self.open_files()
            units = self.pending_units(rows, encoded)
        by_name = {v.name: v for v in self.variants}
        for kind in ("base", "adapter"):
            todo = [
                (unit, missing)
                for unit in units
                if by_name[unit.variant].model == kind and (missing := self._unanswered(unit, rows))
            ]
            if not todo:
                continue
            model = base if kind == "base" and base is not None else self.load_model(kind)
            generator = Generator(model, self.tokenizer, self.settings.generation)
            for number, (unit, missing) in enumerate(todo, start=1):
                if self.stop.requested:
                    self.log("stop requested: no further batches")
                    return
                variant = by_name[unit.variant]
                answers = generator.generate_ids(
                    [encoded[variant.name][i].ids for i in missing], stop_strings=variant.stop_strings
                )
                self.files[variant.name].mine_predictions.append(
                    self._prediction(
                        variant, rows[i], contexts[variant.name][i], encoded[variant.name][i], a, unit.number
                    )
                    for i, a in zip(missing, answers, strict=True)
                )
                self.log(f"{variant.name}: batch {unit.number + 1} answered ({number}/{len(todo)} {kind})")
            del model, generator

    def _unanswered(self, unit: Unit, rows: Sequence[dict[str, Any]]) -> list[int]:
        """The unit's rows (positions) without an answer yet."""
        done = self.files[unit.variant].all_predictions
        return [i for i in unit.rows if int(rows[i]["id"]) not in done]

    @staticmethod
    def _prediction(
        variant: Variant,
        row: dict[str, Any],
        retrieved: RetrievedContext,
        encoded: EncodedPrompt,
        answer: Answer,
        batch: int,
    ) -> dict[str, Any]:
        """One JSONL line; ``context`` and ``prompt`` as the model saw them (parts dropped to fit gone);
        ``batch``: the position, in the variant's decoding plan, of the batch the row was decoded in."""
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
            "kg_lost_entities": retrieved.kg_lost_entities,
            "prompt_tokens": len(encoded.ids),
            "prompt_truncated": encoded.truncated,
            "prompt_over_limit": encoded.over_limit,
            "new_tokens": len(answer.token_ids),
            "stop": answer.stop,
            "batch": batch,
        }

    # ---- scoring -------------------------------------------------------------------------------------
    def score(
        self, rows: Sequence[dict[str, Any]], units: Sequence[Unit], extractor_source: ContextBuilder
    ) -> None:
        """Score the answered, unscored rows of ``units``, one unit (a decoding batch) at a time, with the
        scorers loaded once in this process (on its own device when launched on GPUs)."""
        scorer: Scorer | None = None
        for unit in units:
            files = self.files[unit.variant]
            answers, scored = files.all_predictions, files.all_scores
            chunk = [i for i in (int(rows[r]["id"]) for r in unit.rows) if i in answers and i not in scored]
            if not chunk:
                continue
            if self.stop.requested:
                self.log("stop requested: no further scoring")
                return
            if scorer is None:
                triplets = self.settings.metrics.facts.fact_method == "triplets"
                self.log("loading the metrics (BERTScore encoder, AutoAIS judge, extractors)")
                scorer = Scorer(
                    self.settings.metrics,
                    # FactSumm brings its own models; only the triplet fact score needs the extractors
                    extractor_source.enhancer.extractor if triplets else None,
                    self.cache_dir,
                    fact_label=self.plan.fact_label,
                    device=self.processes.device,
                )
            chunk_rows = [answers[i] for i in chunk]
            values = scorer.score(
                [r["question"] for r in chunk_rows],
                [r["generated"] for r in chunk_rows],
                [r["gold"] for r in chunk_rows],
                [r["context"] or None for r in chunk_rows],
            )
            files.mine_scores.append({"id": i, **v} for i, v in zip(chunk, values, strict=True))
            self.log(f"{unit.variant}: batch {unit.number + 1} scored")

    def collect(self, rows: Sequence[dict[str, Any]]) -> list[VariantScores]:
        """Every variant's scores, read from its (merged) files, rows in id order."""
        ids = [int(row["id"]) for row in rows]
        results = []
        for variant in self.variants:
            predictions = RecordFile(self.predictions_file(variant)).records
            scores = RecordFile(self.scores_file(variant)).records
            scored = [i for i in ids if i in scores]
            keys = sorted({key for i in scored for key in scores[i] if key != "id"})
            results.append(
                VariantScores(
                    variant,
                    scored,
                    {
                        key: np.array(
                            [np.nan if (v := scores[i].get(key)) is None else v for i in scored],
                            dtype=float,
                        )
                        for key in keys
                    },
                    prompts_truncated=sum(bool(predictions[i].get("prompt_truncated")) for i in scored),
                    prompts_over_limit=sum(bool(predictions[i].get("prompt_over_limit")) for i in scored),
                    kg_lost_entities=sum(len(predictions[i].get("kg_lost_entities", ())) for i in scored),
                )
            )
        return results

    # ---- shards --------------------------------------------------------------------------------------
    def merge(self, overwrite: bool = False) -> None:
        """Rank 0: refuse shards made with other settings, and move the others into the variant files."""
        for variant in self.variants:
            stamp = self.fingerprint(variant)
            for main in (self.predictions_file(variant), self.scores_file(variant)):
                check_shards(main, variant.name, stamp, overwrite)
            for main in (self.predictions_file(variant), self.scores_file(variant)):
                added = merge_shards(main, variant.name)
                if added:
                    self.log(f"{variant.name}: {added} rows merged from the shards into {main}")

    def open_files(self) -> None:
        """This process's view of every variant's files: the merged ones and its own shards."""
        self.files = {
            v.name: VariantFiles.open(
                self.predictions_file(v),
                self.scores_file(v),
                v.name,
                self.fingerprint(v),
                self.processes.rank,
                self.processes.world_size,
            )
            for v in self.variants
        }

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Add the wall time of the block to :attr:`timings` under ``name`` (logged per rank)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - started

    # ---- the whole run -------------------------------------------------------------------------------
    def run(self, overwrite: bool = False) -> ResultsTable | None:
        """Contexts, answers, scores, table (Markdown + CSV) and W&B logging; returns the table (on rank 0;
        None on the other ranks). Raises :class:`Preempted` when a stop was requested before the end."""
        zero = self.processes.is_zero
        if zero:
            print(self.plan.to_text(), file=sys.stderr, flush=True)
        check_models(self.plan, "evaluate", self.variants)
        if zero:
            for variant in self.variants:
                self.check_settings(variant, overwrite)
            self.merge(overwrite)
        self.processes.barrier()
        self.open_files()
        with self.stage("contexts"):
            rows, pool = self.load_rows()
            self.log(f"{len(rows)} {self.settings.split} questions, {len(self.variants)} variants")
            # the LLM extractor is the base generation model: loaded once, it extracts (contexts, fact
            # score) and answers the base variants
            base = self.load_model("base") if self.config.knowledge.uses_generation_model else None
            builder = ContextBuilder(
                pool,
                self.config.retrieval,
                self.config.knowledge,
                self.cache_dir,
                generation_model=GenerationModel(base, self.tokenizer) if base is not None else None,
                tokenizer=self.tokenizer,
                processes=self.processes,
            )
            # retrieval and enhancement once, shared by the processes; each ends with every context
            contexts = builder.for_variants(self.variants, [row["question"] for row in rows])
            summary = builder.knowledge_summary()  # every rank's KG requests (a collective)
            self.log(
                f"contexts ready: retrieved {builder.retrieved} and enhanced {builder.enhanced} queries "
                f"here{summary if zero else ''}"
            )
            encoded = {v.name: self.encode(v, rows, contexts[v.name]) for v in self.variants}
            shares = balance(self.pending_units(rows, encoded), self.processes.world_size) if zero else None
            mine = self.processes.broadcast(shares)[self.processes.rank]
        self.log(f"{len(mine)} batches to answer and score here")
        with self.stage("answers"):
            self.generate(rows, contexts, base, mine, encoded)
        with self.stage("scores"):
            self.score(rows, mine, builder)
        self.log("stage seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.timings.items()))
        timings = self.processes.gather(self.timings)
        if self.processes.any(self.stop.requested):
            raise Preempted("stopped on request; rerun (or requeue) to continue")
        if not zero:
            return None
        self.merge()
        for variant in self.variants:
            order = [int(rows[i]["id"]) for batch in self.batches(encoded[variant.name]) for i in batch]
            write_in_order(self.predictions_file(variant), order)
            write_in_order(self.scores_file(variant), order)
        results = self.collect(rows)
        table = build_table(
            results, self.settings.bootstrap_samples, self.settings.seed, self.plan.model_descriptions()
        )
        paths = write_table(table, self.output_dir)
        write_json_atomic(self.output_dir / "timings.json", {"stage_seconds": timings})
        self.log(f"results: {paths['markdown']} and {paths['csv']}")
        files = {v.name: (self.predictions_file(v), self.scores_file(v)) for v in self.variants}
        log_results(self.settings, self.config.path, table, files, self.output_dir, self.plan.to_json())
        return table


@dataclass
class VariantFiles:
    """One variant's predictions and scores as this process sees them: the merged files, and the files it
    appends to (its own shards; the merged files themselves in a single process)."""

    predictions: RecordFile
    scores: RecordFile
    mine_predictions: RecordFile
    mine_scores: RecordFile

    @classmethod
    def open(
        cls, predictions: Path, scores: Path, variant: str, stamp: str, rank: int, world_size: int
    ) -> VariantFiles:
        merged = RecordFile(predictions), RecordFile(scores)
        if world_size == 1:
            return cls(*merged, *merged)
        shards = (RecordFile(shard_path(path, variant, stamp, rank)) for path in (predictions, scores))
        return cls(*merged, *shards)

    @property
    def all_predictions(self) -> dict[int, dict[str, Any]]:
        return self.predictions.records | self.mine_predictions.records

    @property
    def all_scores(self) -> dict[int, dict[str, Any]]:
        return self.scores.records | self.mine_scores.records
