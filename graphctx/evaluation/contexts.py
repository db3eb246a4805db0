"""The context each variant shows: retrieved pairs (dense or graph) and/or their knowledge-graph sentences.

Retrieval runs once per method over all queries; the knowledge stage once per method whose variants add
KG sentences (its results are cached per query by ``graphctx.knowledge``). Variants without KG sentences
get the pairs fitted to the same token budget, so a context differs between variants only by what the
variant adds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from transformers import PreTrainedTokenizerBase

from graphctx.knowledge.budget import QAPair, build_token_counter, fit_budget
from graphctx.knowledge.enhance import Enhancer, build_enhancer
from graphctx.knowledge.llm import GenerationModel
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.verbalise import Sentence
from graphctx.prompts import Variant
from graphctx.retrieval.index import build_index
from graphctx.retrieval.retriever import Hit, build_retriever
from graphctx.retrieval.settings import RetrievalSettings


@dataclass(frozen=True)
class RetrievedContext:
    """What one query gets from one retrieval method: hits, pairs (under budget), KG sentences (if built);
    all empty for a variant without retrieval."""

    hits: list[Hit]
    pairs: list[QAPair]
    sentences: list[Sentence]
    kg_lost_entities: list[str] = field(default_factory=list)
    """KG entities whose lookups failed for this context (see ``graphctx.knowledge.enhance``)."""


def pairs_for_hits(hits: Sequence[Hit], pool: Mapping[int, Mapping[str, Any]]) -> list[QAPair]:
    """The pool's (question, accepted answer) pairs of ``hits``, best first."""
    missing = [hit.id for hit in hits if hit.id not in pool]
    if missing:
        raise KeyError(f"retrieved ids {missing} are not in the retrieval pool (a stale index?)")
    return [QAPair(pool[hit.id]["question"], pool[hit.id]["answer"], hit.id) for hit in hits]


def knowledge_with_cache(settings: KnowledgeSettings, cache_dir: str | None) -> KnowledgeSettings:
    """``settings`` with the pipeline's cache folder when it names none."""
    if settings.cache_dir or not cache_dir:
        return settings
    return dataclasses.replace(settings, cache_dir=str(cache_dir))


class ContextBuilder:
    """Retrieves from the training pool and enhances with the knowledge stage, lazily per method.

    ``generation_model``: the loaded generation model, lent to the LLM extractor when
    ``knowledge.llm_model`` is ``""`` (it is then required). ``tokenizer``: the generation model's, which
    counts ``knowledge.token_budget`` unless ``knowledge.tokenizer`` names another.
    """

    def __init__(
        self,
        pool: Sequence[Mapping[str, Any]],
        retrieval: RetrievalSettings,
        knowledge: KnowledgeSettings,
        cache_dir: str | None = None,
        enhancer: Enhancer | None = None,
        generation_model: GenerationModel | None = None,
        *,
        tokenizer: PreTrainedTokenizerBase,
    ) -> None:
        self.pool = {int(row["id"]): row for row in pool}
        self.retrieval = retrieval
        self.knowledge = knowledge_with_cache(knowledge, cache_dir)
        self.cache_dir = cache_dir
        self._enhancer = enhancer
        self.generation_model = generation_model
        self._retrievers: dict[str, Any] = {}
        self.count_tokens = build_token_counter(self.knowledge.tokenizer or tokenizer)

    @property
    def enhancer(self) -> Enhancer:
        if self._enhancer is None:
            self._enhancer = build_enhancer(self.knowledge, self.count_tokens, self.generation_model)
        return self._enhancer

    def retriever(self, method: str):
        """The ``dense`` or ``graph`` retriever over the pool (its index built once, then cached)."""
        if method not in self._retrievers:
            settings = dataclasses.replace(self.retrieval, method=method)
            ids = list(self.pool)
            index = build_index(ids, [self.pool[i]["question"] for i in ids], settings, self.cache_dir)
            self._retrievers[method] = build_retriever(index, settings)
        return self._retrievers[method]

    def contexts(self, queries: Sequence[str], method: str, with_knowledge: bool) -> list[RetrievedContext]:
        """Per query: the hits of ``method``, their pairs, and KG sentences when ``with_knowledge``."""
        hits = self.retriever(method).retrieve(list(queries))
        pairs = [pairs_for_hits(h, self.pool) for h in hits]
        if with_knowledge:
            enhanced = self.enhancer.enhance_batch(list(queries), pairs)
            return [
                RetrievedContext(h, e.pairs, e.sentences, e.kg_lost_entities)
                for h, e in zip(hits, enhanced, strict=True)
            ]
        budget = self.knowledge.token_budget
        return [
            RetrievedContext(h, fit_budget(p, [], budget, self.count_tokens)[0], [])
            for h, p in zip(hits, pairs, strict=True)
        ]

    def knowledge_summary(self) -> str:
        """``""``, or the knowledge stage's KG requests and losses so far, for the run's log."""
        if self._enhancer is None:
            return ""
        stats = self._enhancer.kg.stats
        text = (
            f"; KG: {stats.sparql_requests} requests, {stats.retried} retried, {stats.split_requests} split, "
            f"{stats.cache_hits} cache hits, {stats.malformed_responses} malformed responses"
        )
        if stats.lost_entities:
            text += f", {stats.lost_entities} entities lost (kg_lost_entities; the next run asks again)"
        return text

    def for_variants(
        self, variants: Sequence[Variant], queries: Sequence[str]
    ) -> dict[str, list[RetrievedContext]]:
        """Per variant name, per query: what the variant's retrieval gave (the prompt shows what the variant
        adds, see :func:`graphctx.prompts.build_prompt`)."""
        needed: dict[tuple[str, bool], list[RetrievedContext]] = {}
        for variant in variants:
            if variant.retrieval != "none":
                key = (variant.retrieval, variant.knowledge)
                if key not in needed:
                    needed[key] = self.contexts(queries, *key)
        result = {}
        for variant in variants:
            if variant.retrieval == "none":
                result[variant.name] = [RetrievedContext([], [], []) for _ in queries]
            else:
                result[variant.name] = needed[(variant.retrieval, variant.knowledge)]
        return result
