"""Answers to a batch of questions through ``graphctx answer``'s recipe, over the live pool, with what a
reader needs to see why: retrieved neighbours (PageRank scores, links), KG facts, stage times.

The recipe is :class:`~graphctx.pipeline.answerer.Answerer`'s, step for step as ``graphctx answer`` runs
it (contexts → prompts → answers), so one question gets ``graphctx answer``'s answer. What differs is what
is held: the models, the knowledge stage and a :class:`~graphctx.pipeline.contexts.ContextBuilder` (its
index and retriever) stay loaded between requests; the builder is replaced when the committed pool changes
(:class:`~graphctx.serve.live_pool.LivePool`), keeping the knowledge stage and the query encoder. A batch
takes one builder before it starts, so it sees one version of the pool from start to end.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from graphctx.evaluation.attribution.attributor import Attributor
from graphctx.evaluation.attribution.corpus import question_link
from graphctx.generation.decoder import Answer
from graphctx.pipeline.answerer import Answerer
from graphctx.pipeline.contexts import ContextBuilder, RetrievedContext
from graphctx.prompts import VARIANTS, Variant
from graphctx.serve.live_pool import LivePool


def neighbourhood_edges(builder: ContextBuilder, method: str, ids: Sequence[int]) -> list[list[float]]:
    """The question graph's edges among the pool questions ``ids`` as ``[id, id, weight]`` (each once);
    none for a method without a graph."""
    if method not in ("graph", "graph_push") or not ids:
        return []
    index = builder.index(method)
    position = {int(qid): node for node, qid in enumerate(index.ids.tolist())}
    nodes = torch.tensor([position[qid] for qid in ids if qid in position], dtype=torch.long)
    source, target = index.graph.edge_index
    inside = torch.isin(source, nodes) & torch.isin(target, nodes) & (source < target)
    pool_ids = index.ids
    return [
        [int(pool_ids[a]), int(pool_ids[b]), float(w)]
        for a, b, w in zip(source[inside], target[inside], index.graph.edge_weight[inside], strict=True)
    ]


class ServedAnswerer:
    """The loaded recipe (``answerer``) over the live pool (``pool``); ``host``: the site's host for links;
    ``config``: the run's configuration, whose ``evaluation.attribution`` architectures attribute each
    answer (issue 41: the same :class:`~graphctx.evaluation.attribution.attributor.Attributor` as
    ``graphctx answer`` and evaluate.py; none configured: no attributions)."""

    def __init__(self, answerer: Answerer, pool: LivePool, host: str | None, config: Any) -> None:
        self.answerer = answerer
        self.pool = pool
        self.host = host
        self.config = config
        self._builder: ContextBuilder | None = None
        self._attributor: Attributor | None = None
        self._version: tuple[int, int] | None = None

    def builder(self) -> ContextBuilder:
        """The context builder of the committed pool (a new one, sharing the knowledge stage, when the pool
        changed since the last batch)."""
        if self._builder is None or self.pool.version() != self._version:
            snapshot = self.pool.snapshot()
            self.answerer.pool = {int(row["id"]): row for row in snapshot.rows}
            old = self._builder
            loaded = (old._enhancer, old._encoder) if old else (None, None)  # kept: no reload per write
            self._builder = self.answerer.context_builder(*loaded)
            self._attributor = Attributor.from_config(self.config, self.answerer.pool)
            self._version = snapshot.version
        return self._builder

    def answer(self, requests: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """Each ``(question, variant name)``'s response, in order; questions of one variant go together."""
        builder = self.builder()
        responses: dict[int, dict[str, Any]] = {}
        for name in dict.fromkeys(variant for _, variant in requests):
            positions = [i for i, (_, variant) in enumerate(requests) if variant == name]
            questions = [requests[i][0] for i in positions]
            for i, response in zip(positions, self._answer(builder, VARIANTS[name], questions), strict=True):
                responses[i] = response
        return [responses[i] for i in range(len(requests))]

    def _answer(
        self, builder: ContextBuilder, variant: Variant, questions: list[str]
    ) -> list[dict[str, Any]]:
        start = time.perf_counter()
        contexts = builder.for_variants([variant], questions)[variant.name]
        retrieved = time.perf_counter()
        prompts = self.answerer.prompts(variant, questions, contexts)
        prompted = time.perf_counter()
        answers = self.answerer.answer_prompts(variant, prompts)
        generated = time.perf_counter()
        attributions = self.attribute(questions, contexts, answers)
        done = time.perf_counter()
        timings: dict[str, float] = {
            "retrieval_and_kg_ms": 1000 * (retrieved - start),
            "prompt_ms": 1000 * (prompted - retrieved),
            "generation_ms": 1000 * (generated - prompted),
            "attribution_ms": 1000 * (done - generated),
            "total_ms": 1000 * (done - start),
        }
        timings["batch"] = len(questions)  # the requests of this variant answered together
        return [
            self.response(builder, variant, question, context, answer, cited, timings)
            for question, context, answer, cited in zip(
                questions, contexts, answers, attributions, strict=True
            )
        ]

    def attribute(
        self, questions: Sequence[str], contexts: Sequence[RetrievedContext], answers: Sequence[Answer]
    ) -> list[list[dict[str, Any]]]:
        """Each answer's attributions, as prediction lines carry them (``[]`` each without architectures)."""
        if self._attributor is None:
            return [[] for _ in questions]
        lines = [
            {"id": i, "question": question, "generated": answer.text}
            for i, (question, answer) in enumerate(zip(questions, answers, strict=True))
        ]
        facts = [context.enhanced.facts if context.enhanced else [] for context in contexts]
        self._attributor.attach(lines, [answer.prompt for answer in answers], facts, "the request")
        return [line["attributions"] for line in lines]

    def response(
        self,
        builder: ContextBuilder,
        variant: Variant,
        question: str,
        context: RetrievedContext,
        answer: Answer,
        attributions: list[dict[str, Any]],
        timings: Mapping[str, float],
    ) -> dict[str, Any]:
        """One response: the answer, the context the model saw, the neighbours (PageRank or cosine score,
        link) and the graph edges among them, the KG facts, the attributions, the batch's stage times."""
        pool = builder.pool
        hits = [
            {
                "id": hit.id,
                "score": hit.score,
                "fallback": hit.fallback,
                "question": pool[hit.id]["question"],
                "link": question_link(self.host, hit.id),
            }
            for hit in context.hits
        ]
        enhanced = context.enhanced
        facts = [
            {
                "head": fact.fact.head_label,
                "relation": fact.fact.relation_label,
                "tail": fact.fact.tail_label,
                "ids": [fact.fact.head_id, fact.fact.relation_id, fact.fact.tail_id],
                "source": fact.source,
                "sentence": fact.sentence,
            }
            for fact in (enhanced.facts if enhanced else [])
        ]
        return {
            "question": question,
            "variant": variant.name,
            "answer": answer.text,
            "context": answer.prompt.context,
            "hits": hits,
            "edges": neighbourhood_edges(builder, variant.retrieval, [hit.id for hit in context.hits]),
            "kg_sentences": [sentence.text for sentence in context.sentences],
            "kg_facts": facts,
            "attributions": attributions,
            "timings": dict(timings),
        }
