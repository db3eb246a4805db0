"""The evaluation run behind ``evaluate.py``: contexts → answers → scores → results table, all resumable.

Files of ``evaluation.output_dir`` (:mod:`graphctx.evaluation.matrix.run_files`)::

    predictions/<variant>.jsonl   one line per answered question (prompt, context, answer, gold, hits)
    predictions/<variant>.meta.json   the settings the answers depend on (a rerun with others is refused)
    scores/<variant>/<metric>.jsonl   one line of that metric's scores per scored question
    scores/<variant>/<metric>.meta.json   what computed them (:mod:`~.metric_fingerprints`)
    scores/<variant>.jsonl        every metric's scores of each row, joined (rewritten at the end of a run)
    stale/<time>/                 rows and files that no longer match their settings, moved aside
    results.md, results.csv       the table (means, 95% intervals, paired tests vs fixed baselines)
    timings.json                  the last run's seconds per stage, per process (``stage_seconds``)
    plan.json                     ``graphctx plan --json`` of the run's config (models, stand-ins)
    {predictions,scores/<variant>}/shards/  while a multi-process run goes on: one file per rank

Answers are decoded, and scored, in a fixed order of length-sorted batches over the whole split
(:mod:`graphctx.evaluation.matrix.work_order`); a rerun skips every batch whose rows are already written, so a
resumed run computes exactly what an uninterrupted one would, and so does a run on any number of processes.
The contexts are built once, shared by the ranks (:class:`~graphctx.pipeline.answerer.Answerer`): rank 0
builds or reads the pool index and the KG store first, then each rank retrieves its share of the questions
(whole query batches) and enhances its share (or reads it from the knowledge cache), and the shares are
gathered so that every rank has every context. The pending batches are dealt over the ranks, each answers
(:mod:`~graphctx.evaluation.matrix.answering`) and scores (:mod:`~graphctx.evaluation.matrix.score_stage`)
its own into its shards, and rank 0 merges them into the files a single process writes, rows in decoding order
(:mod:`~graphctx.evaluation.matrix.merging`).

A rerun never deletes a row (:mod:`graphctx.evaluation.matrix.resume_guard`): a metric whose settings changed
is re-scored (its old scores moved aside into ``stale/``), the other metrics and the answers are kept; answers
made with other settings are refused, or moved aside with ``--overwrite``; rows outside the requested
``evaluation.limit`` or variants stay in place (the table shows the requested rows); a row whose id is not in
the split is moved aside.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from graphctx.cache import write_json_atomic
from graphctx.errors import ConfigError
from graphctx.evaluation.attribution.attributor import Attributor, configured
from graphctx.evaluation.attribution.report import run_section
from graphctx.evaluation.jsonl import check_unique_ids
from graphctx.evaluation.matrix.answering import AnswerStage
from graphctx.evaluation.matrix.beside_paper import paper_section
from graphctx.evaluation.matrix.judge_controls import JudgeControls, JudgeReport
from graphctx.evaluation.matrix.merging import merge, tidy
from graphctx.evaluation.matrix.resume_guard import ResumeGuard
from graphctx.evaluation.matrix.run_files import RunFiles, VariantFiles
from graphctx.evaluation.matrix.score_stage import ScoreStage, collect
from graphctx.evaluation.matrix.shards import Unit, balance
from graphctx.evaluation.matrix.stale import StaleArea
from graphctx.evaluation.matrix.table import ResultsTable, build_table, write_table
from graphctx.evaluation.matrix.timing import StageTimer, stderr_logger
from graphctx.evaluation.matrix.tracking import log_results
from graphctx.evaluation.matrix.unscored import unscored_warnings
from graphctx.evaluation.matrix.work_order import decoding_order, pending_units
from graphctx.evaluation_settings import EvaluationSettings
from graphctx.folder_lock import FolderLock
from graphctx.generation.loading import resolve_device
from graphctx.metrics.paper_settings import unlike_paper
from graphctx.metrics.registry import column_order, entries_named
from graphctx.model import load_tokenizer
from graphctx.pipeline.answerer import Answerer
from graphctx.pipeline.contexts import RetrievedContext, context_steps
from graphctx.pipeline.processes import Preempted, Processes, StopRequest
from graphctx.pipeline.run_config import RunConfig
from graphctx.progress import Progress
from graphctx.prompts import EncodedPrompt, Variant, get_variants, retriever_twin
from graphctx.stack.descriptions import model_descriptions
from graphctx.stack.memory import check_memory
from graphctx.stack.model_stack import ModelStack, check_models
from graphctx.stack.report import PLAN_FILE, plan_json, plan_text

Rows = Sequence[dict[str, Any]]
Contexts = dict[str, list[RetrievedContext]]
Encoded = dict[str, list[EncodedPrompt]]


class MatrixEvaluation:
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
        metrics: Sequence[str] | None = None,
    ) -> None:
        """``processes``: this process's place in a multi-process run (:func:`launch_processes`); ``stop``:
        the stop request to honour after each batch (default: one installed now); ``metrics``: score only
        the metrics of these registry names (``--metrics``; default every metric of the config). Their
        fingerprints are those of a run that scores every metric."""
        self.config = config
        self.settings: EvaluationSettings = config.evaluation
        self.variants = get_variants(variants if variants is not None else self.settings.variants)
        self.limit = limit if limit is not None else self.settings.limit
        if self.limit is not None and self.limit < 1:
            raise ConfigError(f"evaluation.limit: must be at least 1, got {self.limit}")
        self.output_dir = Path(output_dir) if output_dir else config.output_dir
        self.cache_dir = config.cache_dir
        self.processes = processes or Processes()
        self.log = log or stderr_logger(self.processes)
        self.stop = stop or StopRequest()
        configured(config)  # a bad evaluation.attribution is refused before anything is written
        self.metrics = config.metric_entries
        if metrics is not None:
            self.metrics = entries_named(config.metric_entries, metrics, "--metrics")
        self.run_files = RunFiles(self.output_dir, tuple(entry.name for entry in self.metrics))
        self.stale = StaleArea(self.output_dir, self.log)
        """Where this run moves rows and files that no longer match (``stale/<time>/``)."""
        self.plan = ModelStack(config)
        self.guard = ResumeGuard(config, self.run_files, self.stale)
        self.files: dict[str, VariantFiles] = {}
        self.split_ids: set[int] = set()
        """Every id of the evaluated split (before ``limit``): a row with another id is foreign."""
        self.timings = StageTimer()
        self.tokenizer = load_tokenizer(config.model.spec)
        self.answerer: Answerer | None = None
        """The answering recipe over the training pool, once :meth:`load_rows` has read it."""

    @property
    def pool(self) -> dict[int, dict[str, Any]]:
        """The training split by id (the retrieval pool), once :meth:`load_rows` has read it."""
        return self.answerer.pool if self.answerer else {}

    # ---- the whole run -------------------------------------------------------------------------------
    def evaluate(self, overwrite: bool = False) -> ResultsTable | None:
        """Contexts, answers, scores, table (Markdown + CSV) and W&B logging; returns the table (on rank 0;
        None on the other ranks). Raises :class:`Preempted` when a stop was requested before the end, and
        ``ConfigError`` when another run holds the output folder (:mod:`graphctx.folder_lock`)."""
        lock = FolderLock(self.output_dir, "another evaluate.py run")
        held = lock.acquire() if self.processes.is_zero else True  # the ranks of one run share the folder
        try:
            if self.processes.any(not held):
                raise lock.refusal()
            self.prepare(overwrite)
            with self.timings.stage("contexts"):
                rows = self.load_rows()
                self.log(f"{len(rows)} {self.settings.split} questions, {len(self.variants)} variants")
                with self.contexts_progress() as progress:
                    contexts = self.build_contexts(rows, progress)
                    encoded = self.encode_all(rows, contexts, progress)
                mine = self.my_units(rows, encoded)
            self.log(f"{len(mine)} batches to answer and score here")
            with self.timings.stage("answers"):
                self.generate(rows, contexts, mine, encoded)
            with self.timings.stage("scores"):
                self.score(rows, mine)
            timings = self.end_stages()
            return self.report(rows, encoded, timings) if self.processes.is_zero else None
        finally:
            lock.release()

    def prepare(self, overwrite: bool) -> None:
        """Models and memory checked; rank 0 checks every variant's files against this run's settings and
        merges what an earlier run's processes left; every process then opens its view of the files."""
        if self.processes.is_zero:
            print(plan_text(self.plan), file=sys.stderr, flush=True)
        check_models(self.plan, "evaluate", self.variants, [entry.name for entry in self.metrics])
        device = self.processes.device or resolve_device(self.config.generation)
        check_memory(self.plan.memory, "evaluate", device)  # a GPU too small for a stage fails here
        if self.processes.is_zero:
            for variant in self.variants:
                self.guard.check_settings(variant, overwrite)
            self.merge(overwrite)
        self.processes.barrier()
        self.open_files()

    def end_stages(self) -> list[dict[str, float]]:
        """Every process's seconds per stage; raises :class:`Preempted` when any process was asked to stop."""
        self.log(self.timings.summary())
        timings = self.processes.gather(dict(self.timings))
        if self.processes.any(self.stop.requested):
            raise Preempted("stopped on request; rerun (or requeue) to continue")
        return timings

    def report(self, rows: Rows, encoded: Encoded, timings: list[dict[str, float]]) -> ResultsTable:
        """Rank 0: the files merged and tidied, the table written (and logged to W&B), the timings."""
        self.merge()
        self.tidy(rows, encoded)
        settings = self.settings
        results = collect(self.variants, self.run_files, rows)
        table = build_table(
            results,
            settings.bootstrap_samples,
            settings.seed,
            model_descriptions(self.plan, [variant.name for variant in self.variants]),
            comparisons=retriever_twins(self.variants) | settings.comparisons,
            n_permutations=settings.permutation_samples,
            columns=column_order(self.metrics),
        )
        beside = paper_section(
            table,
            rows[0].get("site"),
            self.config.model.spec.source,
            unlike_paper(self.config.evaluation.metrics),
        )
        judges = JudgeReport.of(self.judge_controls(rows), self.metrics, table, results)
        table.marks = judges.marks()
        predictions = {v.label: self.run_files.predictions_file(v) for v in self.variants}
        attribution = run_section(self.config, predictions, [int(row["id"]) for row in rows])
        appendix = "\n".join(part for part in (beside, attribution, judges.markdown(table.columns)) if part)
        paths = write_table(table, self.output_dir, appendix=appendix)
        write_json_atomic(self.output_dir / "judges.json", judges.as_json())
        for line in unscored_warnings(table, self.metrics):
            self.log(line)
        write_json_atomic(self.output_dir / "timings.json", {"stage_seconds": timings})
        plan = plan_json(self.plan)
        write_json_atomic(self.output_dir / PLAN_FILE, plan)
        self.log(f"results: {paths['markdown']} and {paths['csv']}")
        run_files = self.run_files
        files = {v.name: (run_files.predictions_file(v), run_files.scores_file(v)) for v in self.variants}
        log_results(settings, self.config.path, table, files, self.output_dir, plan)
        return table

    # ---- data, contexts and prompts ------------------------------------------------------------------
    def load_rows(self) -> list[dict[str, Any]]:
        """The evaluated rows, sorted by id and cut to ``limit``; the training split becomes the
        :attr:`answerer`'s pool (:attr:`pool`)."""
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
        self.answerer = Answerer.from_config(
            self.config,
            pool=list(dataset["train"]),
            tokenizer=self.tokenizer,
            processes=self.processes,
            log=self.log,
        )
        return rows

    def contexts_progress(self) -> contextlib.AbstractContextManager[Progress | None]:
        """The contexts stage's progress on rank 0 (None on the others): a step per index, retrieval and
        set of contexts (:func:`context_steps`), and per variant its prompts fitted."""
        if not self.processes.is_zero:
            return contextlib.nullcontext()
        return Progress("contexts", context_steps(self.variants) + len(self.variants), "steps")

    def build_contexts(self, rows: Rows, progress: Progress | None = None) -> Contexts:
        """Every variant's contexts; the stage's models (the embedder, REBEL, and the LLM extractor: the
        base model) are freed before the answers' load."""
        contexts = self.answerer.contexts(self.variants, [row["question"] for row in rows], progress)
        self.answerer.release()
        return contexts

    def encode_all(self, rows: Rows, contexts: Contexts, progress: Progress | None = None) -> Encoded:
        """Each variant's prompts of ``rows``, fitted to ``max_prompt_tokens`` (``progress``: a step per
        variant)."""
        questions = [row["question"] for row in rows]
        answerer = self.answerer
        encoded = {}
        for v in self.variants:
            encoded[v.name] = answerer.encode(answerer.prompts(v, questions, contexts[v.name]))
            if progress is not None:
                progress.advance(1, f"{len(questions)} prompts fitted ({v.name})")
        return encoded

    # ---- the work order ------------------------------------------------------------------------------
    def batches(self, encoded: Sequence[EncodedPrompt]) -> list[list[int]]:
        """The variant's fixed decoding order over the whole split (independent of what is done already)."""
        return decoding_order(encoded, self.config.generation.batch_size)

    def pending_units(self, rows: Rows, encoded: Encoded) -> list[Unit]:
        """Every batch of every variant with a row still to answer or to score, in decoding order."""
        generation = self.config.generation
        return pending_units(
            self.variants, rows, encoded, self.files, generation.batch_size, generation.max_new_tokens
        )

    def my_units(self, rows: Rows, encoded: Encoded) -> list[Unit]:
        """This process's share of the pending units (rank 0 deals them out)."""
        shares = None
        if self.processes.is_zero:
            shares = balance(self.pending_units(rows, encoded), self.processes.world_size)
        return self.processes.broadcast(shares)[self.processes.rank]

    # ---- answers and scores --------------------------------------------------------------------------
    def generate(
        self,
        rows: Rows,
        contexts: Contexts,
        units: Sequence[Unit] | None = None,
        encoded: Encoded | None = None,
    ) -> None:
        """Answer the rows of ``units`` (default: every pending batch) not answered yet
        (:class:`AnswerStage`); ``encoded``: the prompts per variant, if already made."""
        if self.answerer is None:
            self.load_rows()
        if encoded is None:
            encoded = self.encode_all(rows, contexts)
        if units is None:
            self.open_files()
            units = self.pending_units(rows, encoded)
        attributor = Attributor.from_config(self.config, self.answerer.pool, self.processes.device)
        stage = AnswerStage(
            self.answerer, self.variants, rows, contexts, encoded, self.files, self.stop, self.log, attributor
        )
        stage.answer(units)
        if attributor is not None:
            attributor.release()  # the judge and the post-hoc retrievers go before the scores' models

    def score(self, rows: Rows, units: Sequence[Unit]) -> None:
        """Score the answered rows of ``units`` that a metric has not scored yet (:class:`ScoreStage`)."""
        device = self.processes.device
        ScoreStage(
            self.metrics,
            self.answerer,
            device,
            rows,
            self.files,
            self.stop,
            self.log,
            self.guard.gold_folder,
            self.judge_controls(rows) if self.processes.is_zero else None,
        ).score(units)

    def judge_controls(self, rows: Rows) -> JudgeControls:
        """The control pairs of ``rows`` for the judge metrics (:mod:`~.judge_controls`)."""
        return JudgeControls.of_rows(
            rows, self.settings.seed, self.cache_dir, self.guard.scorer_parts, list(self.pool.values())
        )

    # ---- files: the resume guard, shards, tidying ----------------------------------------------------
    def merge(self, overwrite: bool = False) -> None:
        """Rank 0: the processes' shards into the files (:func:`~.merging.merge`)."""
        merge(self.variants, self.guard, self.log, overwrite)

    def tidy(self, rows: Rows, encoded: Encoded) -> None:
        """Rank 0, after the final merge: every variant's files tidied, rows in decoding order."""
        why = f"ids not in split {self.settings.split!r} of {self.config.data.dataset.source}"
        for variant in self.variants:
            order = [int(rows[i]["id"]) for batch in self.batches(encoded[variant.name]) for i in batch]
            tidy(variant, self.run_files, self.stale, order, self.split_ids, why)
        if self.stale.moved:
            self.log(self.stale.summary())

    def open_files(self) -> None:
        """This process's view of every variant's files: the merged ones and its own shards."""
        guard, rank, world = self.guard, self.processes.rank, self.processes.world_size
        self.files = {
            v.name: VariantFiles.open(
                (self.run_files.predictions_file(v), v.name, guard.fingerprint(v)),
                [
                    (path, name, guard.metric_fingerprint(v, name))
                    for path, name in self.run_files.metric_files(v)
                ],
                rank,
                world,
            )
            for v in self.variants
        }


def retriever_twins(variants: Sequence[Variant]) -> dict[str, str]:
    """Each ``<variant>@<retriever>`` variant and its own matrix variant: the default paired test (a
    configured ``evaluation.comparisons`` entry wins)."""
    return {v.name: twin for v in variants if (twin := retriever_twin(v)) is not None}
