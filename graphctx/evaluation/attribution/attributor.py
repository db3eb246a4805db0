"""Each answered row's attributions, one per architecture of ``evaluation.attribution``, as the prediction
line's ``attributions`` field.

Every chosen passage is judged as the paper scores AutoAIS: premise = the passage's text, hypothesis =
``evaluation.metrics.autoais.hypothesis_template`` of the question and the answer (TRUE's template, as the
whole-context AutoAIS uses it), ``probability`` = the judge's P(entail); the attribution is attributable
when it is ≥ 0.5 (:data:`THRESHOLD`). A passage + hypothesis over the judge's input limit is not judged
(probability null, counted against coverage), and an empty answer states nothing attributable
(probability 0), as :class:`~graphctx.metrics.autoais.AutoAIS` counts them. An ``autoais_rerank`` row keeps
the probability its judge chose by, and is marked ``judge_in_system``.

A line's ``attributions``: ``[{"architecture", "passage" (corpus id; null: unattributed), "link" (null:
not a post), "text", "probability" (null: not judged), "judge_in_system", "unattributed" (null, or why the
answer has no passage although it has one to attribute: scored 0, e.g. ``rtr``'s "citation mark names no
passage"), "out_of_range" (sentences whose marks name a passage the prompt did not show)}]``, one per
architecture in ``evaluation.attribution``'s order; an architecture with nothing to attribute to (``rtr``
on a prompt without context) has no entry on that line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from graphctx.evaluation.attribution.architectures import (
    Architecture,
    ArchitectureContext,
    AttributionRow,
    architectures,
)
from graphctx.evaluation.attribution.corpus import Corpus, Passage, dataset_site
from graphctx.metrics.settings import AutoAISSettings
from graphctx.retrieval.settings import RetrievalSettings

if TYPE_CHECKING:  # torch and transformers load with the judge and the retrievers, not on import
    from graphctx.metrics.judges import EntailmentJudge
    from graphctx.prompts import Prompt
    from graphctx.retrieval.retriever import Hit, Retriever

THRESHOLD = 0.5
"""P(entail) at or above which an attribution counts as attributable (AutoAIS on the attribution)."""


class JudgeAndRetrievers:
    """The :class:`~graphctx.evaluation.attribution.architectures.Tools` of a run: the corpus, the pool's
    retrievers at depth k (built on first use), the AutoAIS judge (loaded on first use)."""

    def __init__(
        self,
        corpus: Corpus,
        retrieval: RetrievalSettings,
        judge_settings: AutoAISSettings,
        cache_dir: str | None = None,
        device: str | None = None,
        judge: EntailmentJudge | None = None,
    ) -> None:
        self.corpus = corpus
        self.retrieval = retrieval
        self.judge_settings = judge_settings
        self.cache_dir = cache_dir
        self.device = device
        self._judge = judge
        self._retrievers: dict[tuple[str, int], Retriever] = {}

    @property
    def judge(self) -> EntailmentJudge:
        if self._judge is None:
            from graphctx.metrics.judges import build_judge

            self._judge = build_judge(self.judge_settings, self.cache_dir, self.device)
        return self._judge

    def retrieve(self, retriever: str, k: int, queries: Sequence[str]) -> list[list[Hit]]:
        """Each query's top ``k`` by ``retriever``: a retriever already built at least ``k`` deep is reused
        (its rankings cut to ``k``), else one is built at depth ``k``."""
        deep = [depth for name, depth in self._retrievers if name == retriever and depth >= k]
        if not deep:
            from graphctx.pipeline.pool import pool_retriever

            settings = dataclasses.replace(self.retrieval, method=retriever, top_k=k)
            self._retrievers[retriever, k] = pool_retriever(
                self.corpus.pool.values(), settings, self.cache_dir
            )
            deep = [k]
        return [hits[:k] for hits in self._retrievers[retriever, min(deep)].retrieve(queries)]

    def probabilities(
        self, rows: Sequence[AttributionRow], passages: Sequence[Passage]
    ) -> list[float | None]:
        template = self.judge_settings.hypothesis_template
        hypotheses = [template.format(question=row.question, answer=row.answer) for row in rows]
        premises = [passage.text for passage in passages]
        out: list[float | None] = [0.0 if not row.answer.strip() else None for row in rows]
        todo = [i for i, row in enumerate(rows) if row.answer.strip()]
        if not todo:
            return out
        judge = self.judge
        lengths = judge.input_lengths([premises[i] for i in todo], [hypotheses[i] for i in todo])
        todo = [i for i, length in zip(todo, lengths, strict=True) if length <= judge.max_input_tokens]
        if todo:
            _, soft = judge.judge([premises[i] for i in todo], [hypotheses[i] for i in todo])
            for i, p in zip(todo, soft.tolist(), strict=True):
                out[i] = float(p)
        return out

    def release(self) -> None:
        """Let go of the judge and the retrievers (loaded again on next use)."""
        self._judge = None
        self._retrievers.clear()


class Attributor:
    """The attributions of answered rows by every configured architecture (module docstring)."""

    def __init__(self, chosen: Sequence[Architecture], tools: JudgeAndRetrievers) -> None:
        self.architectures = list(chosen)
        self.tools = tools

    @classmethod
    def from_config(
        cls,
        config: Any,
        pool: Mapping[int, Mapping[str, Any]],
        device: str | None = None,
        judge: EntailmentJudge | None = None,
    ) -> Attributor | None:
        """The attributor of a :class:`~graphctx.pipeline.run_config.RunConfig` over ``pool``; None when
        ``evaluation.attribution`` is empty. Its architectures are checked here (one-line errors)."""
        chosen = configured(config)
        if not chosen:
            return None
        dataset = config.data.dataset
        corpus = Corpus(pool, dataset_site(dataset.source, dataset.site))
        autoais = config.evaluation.metrics.autoais
        tools = JudgeAndRetrievers(corpus, config.retrieval, autoais, config.cache_dir, device, judge)
        return cls(chosen, tools)

    def attributions(self, rows: Sequence[AttributionRow]) -> list[list[dict[str, Any]]]:
        """Per row, one attribution per architecture that found a passage, in ``evaluation.attribution``'s
        order."""
        per_row: list[list[dict[str, Any]]] = [[] for _ in rows]
        for architecture in self.architectures:
            choices = architecture.choose(rows, self.tools)
            # the judge's P(entail) of each chosen passage, unless the architecture judged it itself
            todo = [
                (i, c.passage)
                for i, c in enumerate(choices)
                if c.passage is not None and c.probability is None and not architecture.judge_in_system
            ]
            judged = self.tools.probabilities([rows[i] for i, _ in todo], [passage for _, passage in todo])
            probabilities = {i: p for (i, _), p in zip(todo, judged, strict=True)}
            for i, choice in enumerate(choices):
                if choice.passage is None and choice.unattributed is None:
                    continue  # nothing to attribute to: no entry for this architecture
                passage = choice.passage
                per_row[i].append(
                    {
                        "architecture": architecture.name,
                        "passage": None if passage is None else passage.id,
                        "link": None if passage is None else passage.link,
                        "text": "" if passage is None else passage.text,
                        "probability": probabilities.get(i, choice.probability),
                        "judge_in_system": architecture.judge_in_system,
                        "unattributed": choice.unattributed,
                        "out_of_range": choice.out_of_range,
                    }
                )
        return per_row

    def attach(
        self,
        lines: Sequence[dict[str, Any]],
        prompts: Sequence[Prompt],
        facts: Sequence[Sequence[Any]],
        where: str,
    ) -> None:
        """Add ``attributions`` to each prediction line (``generated``, ``question`` and, where the prompt
        asked for them, ``citations``), of its fitted prompt and its context's KG facts; ``where``: the
        predictions file, for messages."""
        rows = [
            row_of(line, prompt, row_facts, self.tools.corpus, f"{where}, row {line['id']}")
            for line, prompt, row_facts in zip(lines, prompts, facts, strict=True)
        ]
        for line, found in zip(lines, self.attributions(rows), strict=True):
            line["attributions"] = found

    def release(self) -> None:
        self.tools.release()


def row_of(
    line: Mapping[str, Any], prompt: Prompt, facts: Sequence[Any], corpus: Corpus, where: str
) -> AttributionRow:
    """A prediction line as an architecture reads it: its fitted prompt's passages and its marks."""
    citations = line.get("citations")
    marks = None if citations is None else [list(sentence["passages"]) for sentence in citations]
    return AttributionRow(
        line["question"],
        line["generated"],
        corpus.context(prompt.pairs, prompt.sentences, facts),
        marks,
        where,
    )


def configured(config: Any) -> list[Architecture]:
    """The architectures of ``config``'s ``evaluation.attribution`` (checked; one-line errors)."""
    return architectures(config.evaluation.attribution, ArchitectureContext(tuple(config.retriever_entries)))


def fingerprint_parts(config: Any) -> dict[str, Any]:
    """What the lines' attributions depend on beyond the answers: each architecture (class, arguments,
    module source), this module's source, the site (links), the judge (its settings, resolved choice and
    model files) and the retrieval settings and retriever plug-ins the post-hoc ones rank with; ``{}``
    when ``evaluation.attribution`` is empty."""
    import hashlib
    from pathlib import Path

    from graphctx.metrics.choice import choose_judge
    from graphctx.model_use import model_identity

    chosen = configured(config)
    if not chosen:
        return {}
    autoais = config.evaluation.metrics.autoais
    judge = choose_judge(autoais)
    dataset = config.data.dataset
    return {
        "architectures": [a.fingerprint() for a in chosen],
        "attributor_sha256": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
        "site": dataset_site(dataset.source, dataset.site),
        "judge": {
            "settings": {
                k: v for k, v in dataclasses.asdict(autoais).items() if k not in {"batch_size", "device"}
            },
            "resolved": [judge.protocol, judge.max_input_tokens, judge.label],
            "model": model_identity(judge.model),
        },
        # flat (RetrievalSettings.flat): keyed as before the retrieval.scale section existed
        "retrieval": {k: v for k, v in config.retrieval.flat().items() if k != "device"},
        "retrievers": {name: entry.fingerprint() for name, entry in config.retriever_entries.items()},
    }


def judge_name(settings: AutoAISSettings) -> str:
    """The judge as results.md names it: model, protocol, and its stand-in label when not the paper's."""
    from graphctx.metrics.choice import choose_judge
    from graphctx.metrics.registry import stand_in_tag

    judge = choose_judge(settings)
    return f"{judge.model} ({judge.protocol}){stand_in_tag(judge.label)}"
