"""The evaluation run behind ``evaluate.py``: contexts → answers → scores → results table, all resumable.

Layout of ``evaluation.output_dir``::

    predictions/<variant>.jsonl   one line per answered question (prompt, context, answer, gold, hits)
    predictions/<variant>.meta.json   the settings the answers depend on (a rerun with others is refused)
    scores/<variant>/<metric>.jsonl   one line of that metric's scores per scored question
    scores/<variant>/<metric>.meta.json   what computed them (:mod:`graphctx.evaluation.score_keys`)
    scores/<variant>.jsonl        every metric's scores of each row, joined (rewritten at the end of a run)
    stale/<time>/                 rows and files that no longer match their settings, moved aside
    results.md, results.csv       the table (means, 95% intervals, paired tests vs fixed baselines)
    timings.json                  the last run's seconds per stage, per process (``stage_seconds``)
    {predictions,scores/<variant>}/shards/  while a multi-process run goes on: one file per rank

Answers are decoded, and scored, in a fixed order of length-sorted batches over the whole split
(:mod:`graphctx.evaluation.shards`); a rerun skips every batch whose rows are already written, so a resumed
run computes exactly what an uninterrupted one would, and so does a run on any number of processes. The
contexts are built once, shared by the ranks (:class:`~graphctx.pipeline.contexts.ContextBuilder`): rank
0 builds or reads the pool index and the KG store first, then each rank retrieves its share of the
questions (through ``predict_hits``) and enhances its share (or reads it from the knowledge cache), and the
shares are gathered so that every rank has every context. The pending batches are dealt over the ranks,
each answers and scores its own into its shards, and rank 0 merges them into the files a single process
writes, rows in decoding order.

A rerun never deletes a row: a metric whose settings changed is re-scored (its old scores moved aside into
``stale/``, :mod:`graphctx.evaluation.stale`), the other metrics and the answers are kept; answers made with
other settings are refused, or moved aside with ``--overwrite``; rows outside the requested ``--limit`` or
variants stay in place (the table shows the requested rows); a row whose id is not in the split is moved
aside.
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

from graphctx.baselines import ANSWER_MAKERS, AnswerMaker, candidates_for
from graphctx.cache import atomic_path, file_digest, fingerprint, write_json_atomic
from graphctx.errors import ConfigError
from graphctx.evaluation.beside_paper import paper_section
from graphctx.evaluation.jsonl import RecordFile, check_unique_ids, dump_line, read_records
from graphctx.evaluation.score_keys import changed, metric_parts
from graphctx.evaluation.scoring import Scorer
from graphctx.evaluation.shards import (
    Unit,
    balance,
    foreign_shards,
    merge_shards,
    shard_path,
    write_in_order,
)
from graphctx.evaluation.stale import StaleArea
from graphctx.evaluation.table import ResultsTable, VariantScores, build_table, write_table
from graphctx.evaluation.tracking import log_results
from graphctx.evaluation_settings import EvaluationSettings
from graphctx.generation.decoder import Answer, Generator, length_sorted_batches
from graphctx.generation.loading import BaseWeights, load_generation_model, resolve_device
from graphctx.knowledge.extractors import build_extractor
from graphctx.knowledge.llm import GenerationModel
from graphctx.metrics.settings import METRIC_NAMES
from graphctx.model import load_tokenizer
from graphctx.model.loading import release_memory
from graphctx.pipeline.contexts import ContextBuilder, RetrievedContext, knowledge_with_cache
from graphctx.pipeline.memory import check_memory
from graphctx.pipeline.plan import Plan, check_models
from graphctx.pipeline.processes import Preempted, Processes, StopRequest
from graphctx.pipeline.run_config import RunConfig
from graphctx.prompts import EncodedPrompt, Variant, build_prompt, encode_prompt, get_variants
from graphctx.retrieval.numerics import numerics

ANSWER_FORMAT = 3
"""Bump when the same settings start making other answers (prompt encoding, the weights decoded, stopping);
part of the fingerprint, so a rerun never mixes answers made the old and the new way. 2: the paper's exact
prompt string, NF4-dequantised merge, stop strings for the base variants. 3: the base rows and the LLM
extractor decode the released weights (``generation.base_weights``)."""


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
        "device",  # its type (cpu/cuda), which changes the numbers, is in the fingerprint's numerics
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


def _as_json(parts: dict[str, Any]) -> Any:
    """``parts`` as a meta file stores them (tuples as lists), to compare with a stored copy."""
    return json.loads(json.dumps(parts, default=str))


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
        config: RunConfig,
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
        self.output_dir = Path(output_dir) if output_dir else config.output_dir
        self.cache_dir = config.cache_dir
        self.processes = processes or Processes()
        self.log = log or _stderr_logger(self.processes)
        self.stop = stop or StopRequest()
        self.files: dict[str, VariantFiles] = {}
        self._fingerprints: dict[str, str] = {}
        self._metric_parts: dict[str, dict[str, Any]] | None = None
        self.split_ids: set[int] = set()
        """Every id of the evaluated split (before ``limit``): a row with another id is foreign."""
        self.stale = StaleArea(self.output_dir, self.log)
        """Where this run moves rows and files that no longer match (``stale/<time>/``)."""
        self.pool: dict[int, dict[str, Any]] = {}
        """The training split by id (the retrieval pool), once :meth:`load_rows` has read it."""
        self.timings: dict[str, float] = {}
        """Seconds this process spent per stage (contexts, answers, scores)."""
        self.plan = Plan(config)
        self.tokenizer = load_tokenizer(config.model.spec)
        self.adapter_dir = config.adapter_dir

    # ---- data and contexts ---------------------------------------------------------------------------
    def load_rows(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(evaluated rows sorted by id and cut to ``limit``, the training pool)."""
        dataset = self.config.load_dataset()
        split = self.settings.split
        if split not in dataset:
            raise ConfigError(f"evaluation.split: no split {split!r}; the dataset has {list(dataset)}")
        rows = sorted(dataset[split], key=lambda row: int(row["id"]))
        check_unique_ids(rows, f"{self.config.data.dataset.source} (split {split!r})")
        self.split_ids = {int(row["id"]) for row in rows}
        rows = rows[: self.limit]
        if not rows:
            raise ConfigError(f"evaluation.split: split {split!r} of {self.config.path} is empty")
        self.pool = {int(row["id"]): row for row in dataset["train"]}
        return rows, list(dataset["train"])

    def build_contexts(
        self, rows: Sequence[dict[str, Any]], pool: Sequence[dict[str, Any]]
    ) -> dict[str, list[RetrievedContext]]:
        """Every variant's contexts (retrieval and enhancement once, shared by the processes; each ends with
        every context). The stage's models (the embedder, REBEL, and the LLM extractor: the base model with
        its :meth:`weights`) live only in this call: they are freed on return."""
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
        del base  # the builder holds it while it extracts
        contexts = builder.for_variants(self.variants, [row["question"] for row in rows])
        summary = builder.knowledge_summary()  # every rank's KG requests (a collective)
        self.log(
            f"contexts ready: retrieved {builder.retrieved} and enhanced {builder.enhanced} queries "
            f"here{summary if self.processes.is_zero else ''}"
        )
        return contexts

    # ---- file layout and settings guard --------------------------------------------------------------
    def predictions_file(self, variant: Variant) -> Path:
        return self.output_dir / "predictions" / f"{variant.name}.jsonl"

    def scores_file(self, variant: Variant) -> Path:
        """Every metric's scores of each row, joined: written from the metric files at the end of a run."""
        return self.output_dir / "scores" / f"{variant.name}.jsonl"

    def metric_file(self, variant: Variant, metric: str) -> Path:
        """One metric's scores of ``variant``, the file a run resumes from."""
        return self.output_dir / "scores" / variant.name / f"{metric}.jsonl"

    def prediction_fingerprint(self, variant: Variant) -> dict[str, Any]:
        """Everything a variant's answers depend on; speed-only and training-only knobs are left out, so
        a run can resume on another device or with another batch size."""
        parts: dict[str, Any] = {
            "answer_format": ANSWER_FORMAT,
            "variant": dataclasses.asdict(variant),
            "stop_strings": list(variant.stop_strings),
            "model": _settings(self.config.model.spec, SPEED_ONLY["model"]),
            "template": dataclasses.asdict(self.config.template),
            "dataset": dataclasses.asdict(self.config.data.dataset),
            "split": self.settings.split,
            # base_weights only binds the base rows: it enters as the variant's ``weights``
            "generation": _settings(self.config.generation, SPEED_ONLY["generation"] | {"base_weights"}),
            "weights": self.weights(variant.model),
        }
        if variant.model == "adapter":
            parts["adapter"] = _adapter_digest(self.adapter_dir)
        if variant.name == "GenQA":  # a retrained GenQA makes other answers
            parts["genqa"] = [
                file_digest(p) for p in sorted(self.config.genqa_dir.glob("model*.safetensors"))
            ]
        if variant.retrieval != "none":
            parts["retrieval"] = _settings(self.config.retrieval, SPEED_ONLY["retrieval"])
            parts["retrieval"]["numerics"] = numerics(self.config.retrieval)  # auto resolved
            parts["knowledge"] = _settings(self.config.knowledge, SPEED_ONLY["knowledge"])
        return parts

    def fingerprint(self, variant: Variant) -> str:
        """The hash of :meth:`prediction_fingerprint` (computed once)."""
        if variant.name not in self._fingerprints:
            self._fingerprints[variant.name] = fingerprint(self.prediction_fingerprint(variant))
        return self._fingerprints[variant.name]

    def metric_fingerprint_parts(self, variant: Variant, metric: str) -> dict[str, Any]:
        """Everything ``metric``'s scores of ``variant`` depend on: its settings, models and library
        (:func:`~graphctx.evaluation.score_keys.metric_parts`), and the variant's answers."""
        if self._metric_parts is None:
            self._metric_parts = metric_parts(
                self.settings.metrics, self.config.knowledge, self.config.model.spec, self.plan.fact_label
            )
        return {"metric": metric, "predictions": self.fingerprint(variant)} | self._metric_parts[metric]

    def metric_fingerprint(self, variant: Variant, metric: str) -> str:
        """The hash of :meth:`metric_fingerprint_parts` (computed once)."""
        key = f"{variant.name}/{metric}"
        if key not in self._fingerprints:
            self._fingerprints[key] = fingerprint(self.metric_fingerprint_parts(variant, metric))
        return self._fingerprints[key]

    def variant_files(self, variant: Variant) -> list[Path]:
        """Every file of ``variant`` a run writes (predictions, their meta, each metric's, the joined)."""
        predictions = self.predictions_file(variant)
        files = [predictions, predictions.with_suffix(".meta.json"), self.scores_file(variant)]
        for metric in METRIC_NAMES:
            path = self.metric_file(variant, metric)
            files += [path, path.with_suffix(".meta.json")]
        return files

    def check_settings(self, variant: Variant, overwrite: bool) -> None:
        """Refuse to extend predictions made with other settings (``overwrite``: move them, and every score
        of the variant, aside into ``stale/``); move aside each metric's scores made with other metric
        settings, so that only that metric is scored again. Nothing is deleted.

        A meta file without a single row (a run that failed before its first answer, e.g. loading the
        adapter) binds nothing: it is replaced."""
        parts = self.prediction_fingerprint(variant)
        meta = {"fingerprint": fingerprint(parts), "settings": parts}
        meta_file = self.predictions_file(variant).with_suffix(".meta.json")
        if meta_file.is_file() and RecordFile(self.predictions_file(variant)).records:
            previous = json.loads(meta_file.read_text())
            if previous["fingerprint"] != meta["fingerprint"]:
                if not overwrite:
                    raise ConfigError(
                        f"{meta_file}: the predictions of {variant.name} were made with other settings; "
                        "use another evaluation.output_dir or pass --overwrite (the old answers are then "
                        "moved into stale/)"
                    )
                differ = ", ".join(changed(previous.get("settings"), _as_json(parts))) or "fingerprint"
                for path in self.variant_files(variant):
                    self.stale.move_file(path, f"--overwrite: answers made with other settings ({differ})")
        legacy = self.scores_file(variant)
        if legacy.is_file() and not legacy.with_suffix("").is_dir():
            self.stale.move_file(legacy, "scores without per-metric fingerprints (an older graphctx)")
        write_json_atomic(meta_file, meta)
        for metric in METRIC_NAMES:
            self._check_metric(variant, metric)

    def _check_metric(self, variant: Variant, metric: str) -> None:
        """Move aside ``metric``'s scores of ``variant`` made with other settings; record this run's."""
        path = self.metric_file(variant, metric)
        parts = self.metric_fingerprint_parts(variant, metric)
        meta = {"fingerprint": self.metric_fingerprint(variant, metric), "settings": parts}
        meta_file = path.with_suffix(".meta.json")
        previous = json.loads(meta_file.read_text()) if meta_file.is_file() else None
        if previous is not None and previous["fingerprint"] == meta["fingerprint"]:
            return
        if path.is_file() and RecordFile(path).records:
            differ = changed((previous or {}).get("settings"), _as_json(parts))
            reason = f"{metric} scores made with other settings ({', '.join(differ) or 'no record'})"
            self.stale.move_file(path, reason)
            self.stale.move_file(meta_file, reason)
        write_json_atomic(meta_file, meta)

    # ---- the work order ------------------------------------------------------------------------------
    def encode(
        self, variant: Variant, rows: Sequence[dict[str, Any]], contexts: Sequence[RetrievedContext]
    ) -> list[EncodedPrompt]:
        """Each row's prompt for ``variant``, fitted to ``max_prompt_tokens``."""
        template = self.config.template
        max_tokens = self.config.generation.max_prompt_tokens
        return [
            encode_prompt(
                self.tokenizer,
                build_prompt(variant, row["question"], retrieved.pairs, retrieved.sentences, template),
                max_tokens,
            )
            for row, retrieved in zip(rows, contexts, strict=True)
        ]

    def batches(self, encoded: Sequence[EncodedPrompt]) -> list[list[int]]:
        """The variant's fixed decoding order over the whole split (independent of what is done already)."""
        return length_sorted_batches([len(e.ids) for e in encoded], self.config.generation.batch_size)

    def pending_units(
        self, rows: Sequence[dict[str, Any]], encoded: dict[str, list[EncodedPrompt]]
    ) -> list[Unit]:
        """Every batch of every variant with a row still to answer or to score (by any metric), in decoding
        order."""
        units = []
        new_tokens = self.config.generation.max_new_tokens
        for variant in self.variants:
            answered = self.files[variant.name].predictions.done
            scored = set.intersection(*(f.done for f in self.files[variant.name].scores.values()))
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
    def weights(self, kind: str) -> BaseWeights:
        """The weights the model of ``kind`` decodes: ``generation.base_weights`` for the base rows (and the
        LLM extractor), the trained ones (+ the adapter) for the fine-tuned rows."""
        return self.config.generation.base_weights if kind == "base" else "trained"

    def load_model(self, kind: str) -> PreTrainedModel:
        """The generation model of ``kind``: ``base`` (its :meth:`weights`), or ``adapter`` (the trained base
        with the trained adapter)."""
        adapter = self.adapter_dir if kind == "adapter" else None
        self.log(
            f"loading the {kind} model ({self.weights(kind)} weights)"
            + (f" with the adapter {adapter}" if adapter else "")
        )
        return load_generation_model(
            self.config.model.spec,
            adapter,
            self.config.generation,
            self.processes.device,
            self.weights(kind),
        )

    def generate(
        self,
        rows: Sequence[dict[str, Any]],
        contexts: dict[str, list[RetrievedContext]],
        units: Sequence[Unit] | None = None,
        encoded: dict[str, list[EncodedPrompt]] | None = None,
    ) -> None:
        """Answer the rows of ``units`` (default: every pending batch) not answered yet, loading each model
        (base, base+adapter) once and freeing it before the next loads; ``encoded``: the prompts per
        variant, if already made. Stops early, after a whole batch, on a stop request."""
        if encoded is None:
            encoded = {v.name: self.encode(v, rows, contexts[v.name]) for v in self.variants}
        if units is None:
            self.open_files()
            units = self.pending_units(rows, encoded)
        by_name = {v.name: v for v in self.variants}
        for kind in ("none", "base", "adapter"):
            todo = [
                (unit, missing)
                for unit in units
                if by_name[unit.variant].model == kind and (missing := self._unanswered(unit, rows))
            ]
            if not todo:
                continue
            if kind == "none":  # the baselines: answers without the LLM
                self.answer_without_llm(todo, rows, contexts, encoded)
                continue
            generator = Generator(self.load_model(kind), self.tokenizer, self.config.generation)
            for number, (unit, missing) in enumerate(todo, start=1):
                if self.stop.requested:
                    self.log("stop requested: no further batches")
                    break
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
            del generator  # the model goes with it, before the next one loads
            release_memory()
            if self.stop.requested:
                return

    def answer_without_llm(
        self,
        todo: Sequence[tuple[Unit, list[int]]],
        rows: Sequence[dict[str, Any]],
        contexts: dict[str, list[RetrievedContext]],
        encoded: dict[str, list[EncodedPrompt]],
    ) -> None:
        """The baseline variants' answers (:mod:`graphctx.baselines`) for ``todo``'s rows, a batch at a time;
        every row's candidates are checked first (no retrieval pool: an error before any answer)."""
        makers = {unit.variant: self.answer_maker(unit.variant) for unit, _ in todo}  # GenQA loads once
        candidates = {
            (unit.variant, i): candidates_for(unit.variant, contexts[unit.variant][i].pairs, self.pool)
            for unit, missing in todo
            for i in missing
        }
        for unit, missing in todo:
            if self.stop.requested:
                self.log("stop requested: no further batches")
                return
            make, variant = makers[unit.variant], next(v for v in self.variants if v.name == unit.variant)
            answers = [
                Answer(make(rows[i]["question"], candidates[unit.variant, i]), [], "no_llm") for i in missing
            ]
            self.files[variant.name].mine_predictions.append(
                self._prediction(
                    variant, rows[i], contexts[variant.name][i], encoded[variant.name][i], a, unit.number
                )
                for i, a in zip(missing, answers, strict=True)
            )
            self.log(f"{variant.name}: batch {unit.number + 1} answered (no LLM)")

    def answer_maker(self, name: str) -> AnswerMaker:
        """The answer function of baseline ``name``; GenQA's is its trained model, loaded here."""
        if name != "GenQA":
            return ANSWER_MAKERS[name]
        from graphctx.baselines.genqa import GenQAAnswerer

        max_new_tokens = self.config.generation.max_new_tokens
        return GenQAAnswerer(self.config.genqa_dir, max_new_tokens, self.processes.device or "cpu")

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
        ``batch``: the position, in the variant's decoding order, of the batch the row was decoded in."""
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
    def score(self, rows: Sequence[dict[str, Any]], units: Sequence[Unit]) -> None:
        """Score the answered rows of ``units`` that a metric has not scored yet, metric by metric (each
        metric's models loaded once in this process, on its own device when launched on GPUs, and freed
        before the next), one unit (a decoding batch) at a time."""
        for metric in METRIC_NAMES:
            scorer: Scorer | None = None
            for unit in units:
                files = self.files[unit.variant]
                answers, scored = files.all_predictions, files.all_scores(metric)
                ids = (int(rows[r]["id"]) for r in unit.rows)
                chunk = [i for i in ids if i in answers and i not in scored]
                if not chunk:
                    continue
                if self.stop.requested:
                    self.log("stop requested: no further scoring")
                    return
                if scorer is None:
                    self.log(f"loading the {metric} metric")
                    scorer = self._scorer((metric,))
                chunk_rows = [answers[i] for i in chunk]
                values = scorer.score(
                    [r["question"] for r in chunk_rows],
                    [r["generated"] for r in chunk_rows],
                    [r["gold"] for r in chunk_rows],
                    [r["context"] or None for r in chunk_rows],
                )
                files.mine_scores[metric].append({"id": i, **v} for i, v in zip(chunk, values, strict=True))
                self.log(f"{unit.variant}: batch {unit.number + 1} scored ({metric})")
            del scorer
            release_memory()

    def _scorer(self, metrics: tuple[str, ...]) -> Scorer:
        """A :class:`Scorer` of ``metrics`` alone; the fact score's triplet extractors are loaded for it
        (the LLM extractor: the base model again, with its :meth:`weights`)."""
        extractor = None
        # FactSumm brings its own models; only the triplet fact score needs the extractors
        if "fact_score" in metrics and self.settings.metrics.facts.fact_method == "triplets":
            knowledge = knowledge_with_cache(self.config.knowledge, self.cache_dir)
            lent = None
            if knowledge.uses_generation_model:
                lent = GenerationModel(self.load_model("base"), self.tokenizer)
            extractor = build_extractor(knowledge, lent)
        return Scorer(
            self.settings.metrics,
            extractor,
            self.cache_dir,
            metrics=metrics,
            fact_label=self.plan.fact_label,
            device=self.processes.device,
        )

    def collect(self, rows: Sequence[dict[str, Any]]) -> list[VariantScores]:
        """Every variant's scores of the requested ``rows`` (rows outside them stay in the files, left out
        of the table), read from its (merged) metric files, rows in id order."""
        ids = [int(row["id"]) for row in rows]
        results = []
        for variant in self.variants:
            predictions = RecordFile(self.predictions_file(variant)).records
            by_metric = [RecordFile(self.metric_file(variant, m)).records for m in METRIC_NAMES]
            scored = [i for i in ids if i in predictions and all(i in s for s in by_metric)]
            scores = {i: {k: v for s in by_metric for k, v in s[i].items()} for i in scored}
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
                    retrieval_fallbacks=[predictions[i].get("retrieval_fallback", []) for i in scored],
                )
            )
        return results

    # ---- shards --------------------------------------------------------------------------------------
    def merge(self, overwrite: bool = False) -> None:
        """Rank 0: refuse prediction shards made with other settings (``overwrite``: move them aside), move
        score shards of another metric fingerprint aside, and move the others into the variant's files."""
        for variant in self.variants:
            predictions = self.predictions_file(variant)
            stamp = self.fingerprint(variant)
            for path, found in foreign_shards(predictions, variant.name, stamp):
                if not overwrite:
                    raise ConfigError(
                        f"{path}: a shard of {variant.name} made with other settings (fingerprint {found}, "
                        f"this run {stamp}); use another evaluation.output_dir or pass --overwrite"
                    )
                self.stale.move_file(path, "--overwrite: a shard of answers made with other settings")
            for metric in METRIC_NAMES:
                main, stamp = self.metric_file(variant, metric), self.metric_fingerprint(variant, metric)
                for path, _ in foreign_shards(main, metric, stamp):
                    self.stale.move_file(path, f"a shard of {metric} scores made with other settings")
            for main, name in ((predictions, variant.name), *self._metric_mains(variant)):
                added = merge_shards(main, name)
                if added:
                    self.log(f"{variant.name}: {added} rows merged from the shards into {main}")

    def _metric_mains(self, variant: Variant) -> list[tuple[Path, str]]:
        return [(self.metric_file(variant, metric), metric) for metric in METRIC_NAMES]

    def tidy(self, rows: Sequence[dict[str, Any]], encoded: dict[str, list[EncodedPrompt]]) -> None:
        """Rank 0, after the final merge: move aside rows whose id is not in the split (and scores without
        an answer), put every file's rows in decoding order (rows outside this run's ``limit`` after them, in
        id order: kept, never dropped), and write each variant's joined scores file."""
        split = self.config.data.dataset.source
        for variant in self.variants:
            predictions = self.predictions_file(variant)
            foreign = RecordFile(predictions).done - self.split_ids
            self.stale.move_rows(predictions, foreign, f"ids not in split {self.settings.split!r} of {split}")
            answered = RecordFile(predictions).done
            order = [int(rows[i]["id"]) for batch in self.batches(encoded[variant.name]) for i in batch]
            write_in_order(predictions, order)
            metric_rows = []
            for main, metric in self._metric_mains(variant):
                orphans = RecordFile(main).done - answered
                self.stale.move_rows(main, orphans, f"{metric} scores of rows without an answer")
                write_in_order(main, order)
                metric_rows.append(RecordFile(main).records)
            joined = [
                {k: v for records in metric_rows for k, v in records.get(i, {}).items()} | {"id": i}
                for i in (r["id"] for r in read_records(predictions))
                if any(i in records for records in metric_rows)
            ]
            data = "".join(dump_line(r) for r in joined)
            with atomic_path(self.scores_file(variant)) as tmp:
                tmp.write_text(data)
        if self.stale.moved:
            self.log(self.stale.summary())

    def open_files(self) -> None:
        """This process's view of every variant's files: the merged ones and its own shards."""
        rank, world = self.processes.rank, self.processes.world_size
        self.files = {
            v.name: VariantFiles.open(
                (self.predictions_file(v), v.name, self.fingerprint(v)),
                [(path, name, self.metric_fingerprint(v, name)) for path, name in self._metric_mains(v)],
                rank,
                world,
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
        device = self.processes.device or resolve_device(self.config.generation)
        check_memory(self.plan.memory, "evaluate", device)  # a GPU too small for a stage fails here
        if zero:
            for variant in self.variants:
                self.check_settings(variant, overwrite)
            self.merge(overwrite)
        self.processes.barrier()
        self.open_files()
        with self.stage("contexts"):
            rows, pool = self.load_rows()
            self.log(f"{len(rows)} {self.settings.split} questions, {len(self.variants)} variants")
            contexts = self.build_contexts(rows, pool)
            release_memory()  # one stage's models at a time: the contexts' go before the answers'
            encoded = {v.name: self.encode(v, rows, contexts[v.name]) for v in self.variants}
            shares = balance(self.pending_units(rows, encoded), self.processes.world_size) if zero else None
            mine = self.processes.broadcast(shares)[self.processes.rank]
        self.log(f"{len(mine)} batches to answer and score here")
        with self.stage("answers"):
            self.generate(rows, contexts, mine, encoded)
        with self.stage("scores"):
            self.score(rows, mine)
        self.log("stage seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.timings.items()))
        timings = self.processes.gather(self.timings)
        if self.processes.any(self.stop.requested):
            raise Preempted("stopped on request; rerun (or requeue) to continue")
        if not zero:
            return None
        self.merge()
        self.tidy(rows, encoded)
        results = self.collect(rows)
        table = build_table(
            results,
            self.settings.bootstrap_samples,
            self.settings.seed,
            self.plan.model_descriptions(),
            comparisons=self.settings.comparisons,
            n_permutations=self.settings.permutation_samples,
        )
        beside = paper_section(table, rows[0].get("site"), self.config.model.spec.source)
        paths = write_table(table, self.output_dir, appendix=beside)
        write_json_atomic(self.output_dir / "timings.json", {"stage_seconds": timings})
        self.log(f"results: {paths['markdown']} and {paths['csv']}")
        files = {v.name: (self.predictions_file(v), self.scores_file(v)) for v in self.variants}
        log_results(self.settings, self.config.path, table, files, self.output_dir, self.plan.to_json())
        return table


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
