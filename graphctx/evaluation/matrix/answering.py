"""The answers stage of an evaluation: each pending batch's unanswered rows answered and written.

The answers come from the :class:`~graphctx.pipeline.answerer.Answerer`: the baselines first (no LLM), then
every base-model batch with the base model, then every fine-tuned batch with the base + adapter, each model
loaded once and freed before the next. A row's line is appended as soon as its batch is decoded, so an
interrupted run loses at most the batch it was on; a stop request is honoured after each batch.

The lines grow by fields only, never change one: ``retrieval_scores`` and, on a KG variant's lines,
``triplets`` and ``kg_facts`` (:mod:`graphctx.knowledge.provenance`) are absent from lines an older
graphctx wrote. The answers are the same either way, so they stay out of the resume fingerprint
(:mod:`~graphctx.evaluation.matrix.resume_guard`): an older run resumes, and readers (the export) give
null for a field a line lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from graphctx.baselines import FALLBACKS
from graphctx.citations import parse_citations
from graphctx.evaluation.attribution.attributor import Attributor
from graphctx.evaluation.matrix.run_files import VariantFiles
from graphctx.evaluation.matrix.shards import Unit
from graphctx.generation.decoder import Answer
from graphctx.knowledge.provenance import fact_records, triplet_records
from graphctx.pipeline.answerer import Answerer
from graphctx.pipeline.contexts import RetrievedContext
from graphctx.pipeline.processes import StopRequest
from graphctx.progress import Progress
from graphctx.prompts import EncodedPrompt, Variant

FALLBACK = "no_llm_fallback"
"""The ``stop`` of a baseline row where the baseline gave up and answered with the top retrieved answer
(:data:`graphctx.baselines.FALLBACKS`); the results table counts them."""

Work = list[tuple[Unit, list[int]]]
"""Units with the positions of their rows still to answer."""


def prediction(
    variant: Variant,
    row: dict[str, Any],
    retrieved: RetrievedContext,
    encoded: EncodedPrompt,
    answer: Answer,
    batch: int,
) -> dict[str, Any]:
    """One JSONL line; ``context`` and ``prompt`` as the model saw them (parts dropped to fit gone);
    ``retrieval_scores`` beside ``retrieved_ids`` (PageRank or cosine, see ``Hit.score``); ``batch``: the
    position, in the variant's decoding order, of the batch the row was decoded in. A KG variant's line
    adds ``triplets`` (τ^init, per extractor and pair) and ``kg_facts`` (τ' with its backend), each marked
    ``in_context`` when its sentence is in the context the model saw (it survived ``knowledge.token_budget``
    and ``generation.max_prompt_tokens``). With ``generation.citations`` the line adds ``passages`` (the
    fitted prompt's numbered passages as the judge reads them, ``Title: …\\n…``, passage n at n - 1) and
    ``citations`` (per answer sentence, ALCE's reading: its text without marks and the passage numbers it
    cites, 1-based as printed, out-of-range ones kept)."""
    line = {
        "id": int(row["id"]),
        "variant": variant.name,
        "question": row["question"],
        "context": encoded.prompt.context,
        "prompt": encoded.prompt.text,
        "generated": answer.text,
        "gold": row["answer"],
        "retrieved_ids": [hit.id for hit in retrieved.hits],
        "retrieval_scores": [float(hit.score) for hit in retrieved.hits],
        "retrieval_fallback": [hit.fallback for hit in retrieved.hits],
        "kg_lost_entities": retrieved.kg_lost_entities,
        "prompt_tokens": len(encoded.ids),
        "prompt_truncated": encoded.truncated,
        "prompt_over_limit": encoded.over_limit,
        "new_tokens": len(answer.token_ids),
        "stop": answer.stop,
        "batch": batch,
    }
    if encoded.prompt.citations:
        line["passages"] = [passage.judged for passage in encoded.prompt.passages]
        line["citations"] = [
            {"sentence": sentence.text, "passages": list(sentence.marks)}
            for sentence in parse_citations(answer.text)
        ]
    enhanced = retrieved.enhanced
    if enhanced is not None:
        shown = encoded.prompt.sentences  # after knowledge.token_budget and max_prompt_tokens
        line["triplets"] = triplet_records(enhanced.extracted, shown)
        line["kg_facts"] = fact_records(enhanced.facts, shown)
    return line


@dataclass
class AnswerStage:
    """The answers of one evaluation's rows: their contexts and prompts per variant, and the files."""

    answerer: Answerer
    variants: Sequence[Variant]
    rows: Sequence[dict[str, Any]]
    contexts: Mapping[str, list[RetrievedContext]]
    encoded: Mapping[str, list[EncodedPrompt]]
    files: Mapping[str, VariantFiles]
    stop: StopRequest
    log: Callable[[str], None]
    attributor: Attributor | None = None
    """Adds each line's ``attributions`` before it is written (``evaluation.attribution``; None: none)."""

    def answer(self, units: Sequence[Unit]) -> None:
        """Answer the rows of ``units`` not answered yet, model kind by model kind (see the module
        docstring); stops early, after a whole batch, on a stop request."""
        by_name = {v.name: v for v in self.variants}
        for kind in ("none", "base", "adapter"):
            todo = [
                (unit, missing)
                for unit in units
                if by_name[unit.variant].model == kind and (missing := self.unanswered(unit))
            ]
            todo.sort(key=lambda work: work[0].number)  # batch by batch across the variants, so the
            # variants of a question follow each other (generation.backend prefix reuses what they share)
            if not todo:
                continue
            if kind == "none":  # the baselines: answers without the LLM
                self.without_llm(todo)
                continue
            self.with_model(kind, todo)
            self.answerer.release()  # the model goes before the next one loads
            if self.stop.requested:
                return

    def unanswered(self, unit: Unit) -> list[int]:
        """The unit's rows (positions) without an answer yet."""
        done = self.files[unit.variant].all_predictions
        return [i for i in unit.rows if int(self.rows[i]["id"]) not in done]

    def with_model(self, kind: str, todo: Work) -> None:
        """``todo``'s rows answered by the generation model of ``kind``, loaded once before its batches.

        A prompt decoded once is not decoded again: a row whose prompt (token ids and stop strings) is one
        this model already answered in this run gets that answer (GraphGen's prompt is TextGen's on
        every query the graph does not link, TextContextGen's is TextGen's where no fact fits), so
        identical prompts get identical answers, whatever batch their rows fell in."""
        self.answerer.model(kind)  # type: ignore[arg-type]
        by_name = {v.name: v for v in self.variants}
        answered: dict[tuple[tuple[int, ...], tuple[str, ...]], Answer] = {}
        copied = 0
        with Progress(f"answers ({kind} model)", sum(len(missing) for _, missing in todo)) as progress:
            for number, (unit, missing) in enumerate(todo, start=1):
                if self.stop.requested:
                    self.log("stop requested: no further batches")
                    break
                variant = by_name[unit.variant]
                keys = [(tuple(self.encoded[variant.name][i].ids), variant.stop_strings) for i in missing]
                first: dict[tuple[tuple[int, ...], tuple[str, ...]], int] = {}
                for i, key in zip(missing, keys, strict=True):
                    if key not in answered:
                        first.setdefault(key, i)  # each new prompt decoded once
                if first:
                    fresh = self.answerer.answer(
                        variant, [self.encoded[variant.name][i] for i in first.values()]
                    )
                    answered.update(zip(first, fresh, strict=True))
                copied += len(missing) - len(first)
                self.write(variant, unit, missing, [answered[key] for key in keys])
                self.log(f"{variant.name}: batch {unit.number + 1} answered ({number}/{len(todo)} {kind})")
                progress.advance(len(missing), f"{variant.name} batch {unit.number + 1} done")
        if copied:
            self.log(f"{copied} rows ({kind} model) had a prompt answered before: its answer reused")

    def without_llm(self, todo: Work) -> None:
        """The baseline variants' answers (:mod:`graphctx.baselines`) for ``todo``'s rows, a batch at a time;
        every row's candidates are checked first (no retrieval pool: an error before any answer)."""
        makers = {name: self.answerer.baseline(name) for name in {unit.variant for unit, _ in todo}}
        candidates = {
            (unit.variant, i): self.answerer.candidates(unit.variant, self.contexts[unit.variant][i])
            for unit, missing in todo
            for i in missing
        }
        with Progress("answers (no LLM)", sum(len(missing) for _, missing in todo)) as progress:
            for unit, missing in todo:
                if self.stop.requested:
                    self.log("stop requested: no further batches")
                    return
                make = makers[unit.variant]
                variant = next(v for v in self.variants if v.name == unit.variant)
                gives_up = FALLBACKS.get(unit.variant, lambda question, candidates: False)
                answers = []
                for i in missing:
                    question, found = self.rows[i]["question"], candidates[unit.variant, i]
                    stop = FALLBACK if gives_up(question, found) else "no_llm"
                    answers.append(Answer(make(question, found), [], stop))
                self.write(variant, unit, missing, answers)
                self.log(f"{variant.name}: batch {unit.number + 1} answered (no LLM)")
                progress.advance(len(missing), f"{variant.name} batch {unit.number + 1} done")

    def write(self, variant: Variant, unit: Unit, missing: list[int], answers: Sequence[Answer]) -> None:
        """Append the lines of ``missing``'s rows of ``unit`` to this process's predictions of ``variant``."""
        contexts, encoded = self.contexts[variant.name], self.encoded[variant.name]
        lines = [
            prediction(variant, self.rows[i], contexts[i], encoded[i], answer, unit.number)
            for i, answer in zip(missing, answers, strict=True)
        ]
        if self.attributor is not None:  # a bad citation mark stops here: the batch is not written
            facts = [contexts[i].enhanced.facts if contexts[i].enhanced else [] for i in missing]
            where = f"predictions of {variant.name}"
            self.attributor.attach(lines, [encoded[i].prompt for i in missing], facts, where)
        self.files[variant.name].mine_predictions.append(lines)
