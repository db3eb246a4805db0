"""The context each variant shows: retrieved pairs (dense or graph) and/or their knowledge-graph sentences.

Retrieval runs once per method over all queries; the knowledge stage once per method whose variants add
KG sentences (its results are cached per query by ``graphctx.knowledge``). Variants without KG sentences
get the pairs fitted to the same token budget, so a context differs between variants only by what the
variant adds.

On several processes (:class:`~graphctx.pipeline.processes.Processes`) the work is shared, never repeated:
rank 0 first builds (or reads from the cache) each method's pool index and the knowledge stage's KG store
while the others wait, then they read them from the caches. Retrieval and enhancement share the work the
same way (:meth:`~graphctx.pipeline.processes.Processes.share`, then ``gather``): each process ranks a
contiguous run of the very query batches a single process ranks, with the same retriever, so the hits are
the same bit for bit, and enhances a contiguous share of the queries (or reads it from the per-query
cache); the shares are gathered, so every process ends with every query's context, in query order.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from transformers import PreTrainedTokenizerBase

from graphctx.knowledge.backends import silent_plugins
from graphctx.knowledge.budget import QAPair, build_token_counter, fit_budget
from graphctx.knowledge.enhance import EnhancedContext, Enhancer, build_enhancer
from graphctx.knowledge.llm import GenerationModel
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.verbalise import Sentence
from graphctx.pipeline.pool import pool_index
from graphctx.pipeline.processes import Processes
from graphctx.progress import Progress
from graphctx.prompts import Variant
from graphctx.retrieval.builders import build_encoder
from graphctx.retrieval.encoder import SentenceEncoder
from graphctx.retrieval.index import RetrievalIndex
from graphctx.retrieval.numerics import resolve_device
from graphctx.retrieval.registry import PoolView, entry_named, retriever_entries
from graphctx.retrieval.retriever import Hit, Retriever
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
    enhanced: EnhancedContext | None = None
    """The knowledge stage's whole output for this query (its triplets and KG facts), None for a variant
    without KG sentences."""


def pairs_for_hits(hits: Sequence[Hit], pool: Mapping[int, Mapping[str, Any]]) -> list[QAPair]:
    """The pool's (question, accepted answer) pairs of ``hits``, best first."""
    missing = [hit.id for hit in hits if hit.id not in pool]
    if missing:
        raise KeyError(f"retrieved ids {missing} are not in the retrieval pool (a stale index?)")
    return [QAPair(pool[hit.id]["question"], pool[hit.id]["answer"], hit.id) for hit in hits]


class SilentSourceWarning:
    """The warning line of each knowledge source whose facts reach none of the contexts
    (:meth:`ContextBuilder.silent_sources`), printed on stderr by rank 0, once: after the first call of
    :meth:`ContextBuilder.for_variants` or :meth:`ContextBuilder.enhanced_contexts` that enhanced a context.
    Every command that enhances goes through one of them; an :class:`~graphctx.pipeline.answerer.Answerer`
    gives all its builders one warning, so ``graphctx serve`` warns on its first answers with KG sentences,
    not on every request or pool version."""

    def __init__(self) -> None:
        self.given = False

    def check(self, builder: ContextBuilder) -> None:
        if self.given or not builder.contexts_enhanced:
            return
        self.given = True
        if builder.processes.is_zero:
            for line in builder.silent_sources():
                print(line, file=sys.stderr, flush=True)


def context_steps(variants: Sequence[Variant]) -> int:
    """The steps :meth:`ContextBuilder.for_variants` reports to its progress: per retrieval method its pool
    index (or retriever) and its retrieval, the knowledge stage's load when a variant adds KG sentences,
    and each set of contexts (a method with or without KG sentences)."""
    retrieving = [v for v in variants if v.retrieval != "none"]
    methods = {v.retrieval for v in retrieving}
    knowledge = any(v.knowledge for v in retrieving)
    return 2 * len(methods) + knowledge + len({(v.retrieval, v.knowledge) for v in retrieving})


def knowledge_with_cache(settings: KnowledgeSettings, cache_dir: str | None) -> KnowledgeSettings:
    """``settings`` with the pipeline's cache folder when it names none."""
    if settings.cache_dir or not cache_dir:
        return settings
    return dataclasses.replace(settings, cache_dir=str(cache_dir))


class ContextBuilder:
    """Retrieves from the training pool and enhances with the knowledge stage, lazily per method.

    ``generation_model``: the loaded generation model, lent to the LLM extractor when
    ``knowledge.llm_model`` is ``""`` (it is then required). ``tokenizer``: the generation model's, which
    counts ``knowledge.token_budget`` unless ``knowledge.tokenizer`` names another. ``processes``: the
    processes that share the work (see the module docstring; every one of them then calls
    :meth:`for_variants` and :meth:`knowledge_summary` with the same arguments). ``enhancer`` and
    ``encoder``: a knowledge stage and a query encoder already loaded (``graphctx serve`` keeps both when
    the pool changes); otherwise each loads on first use, the encoder once for every embedding retriever.
    ``silent_warning``: the silent-source warning this builder shares (default its own).
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
        encoder: SentenceEncoder | None = None,
        tokenizer: PreTrainedTokenizerBase,
        processes: Processes | None = None,
        silent_warning: SilentSourceWarning | None = None,
    ) -> None:
        self.pool = {int(row["id"]): row for row in pool}
        self.retrieval = retrieval
        self.knowledge = knowledge_with_cache(knowledge, cache_dir)
        self.cache_dir = cache_dir
        self._enhancer = enhancer
        self._encoder = encoder
        self.generation_model = generation_model
        self.processes = processes or Processes()
        self._indexes: dict[str, RetrievalIndex] = {}
        self._retrievers: dict[str, Retriever] = {}
        self.retrievers = retriever_entries(retrieval)
        """Every retriever by name (:mod:`graphctx.retrieval.registry`)."""
        self.count_tokens = build_token_counter(self.knowledge.tokenizer or tokenizer)
        self.queries_retrieved = 0
        """Queries this process ranked (summed over the methods)."""
        self.queries_enhanced = 0
        """Queries this process enhanced or read from the knowledge stage's cache."""
        self.facts_by_source: Counter[str] = Counter()
        """KG facts (τ') of every enhanced context, every process's, per source (``kg:<name>``)."""
        self.contexts_enhanced = 0
        """Enhanced contexts, every process's."""
        self.silent_warning = silent_warning or SilentSourceWarning()

    @property
    def enhancer(self) -> Enhancer:
        if self._enhancer is None:
            self._enhancer = build_enhancer(self.knowledge, self.count_tokens, self.generation_model)
        return self._enhancer

    def settings(self, method: str) -> RetrievalSettings:
        return dataclasses.replace(self.retrieval, method=method)

    def index(self, method: str) -> RetrievalIndex:
        """The pool index of ``method`` (built once, then read from the cache)."""
        if method not in self._indexes:
            self._indexes[method] = pool_index(self.pool.values(), self.settings(method), self.cache_dir)
        return self._indexes[method]

    def retriever(self, method: str) -> Retriever:
        """The ``method`` retriever over the pool, in this process (on its own GPU among several processes
        when ``retrieval.device`` is CUDA)."""
        if method not in self._retrievers:
            entry = entry_named(self.retrievers, method, "retrieval")
            on_cuda = resolve_device(self.retrieval.device).type == "cuda"
            device = self.processes.device if on_cuda else None
            if entry.embeds and self._encoder is None:
                self._encoder = build_encoder(self.retrieval, device)
            texts = [row["question"] for row in self.pool.values()]
            pool = PoolView(list(self.pool), texts, self.index, device=device, encoder=self._encoder)
            self._retrievers[method] = entry.build(pool)
        return self._retrievers[method]

    def prepare(self, variants: Sequence[Variant], progress: Progress | None = None) -> None:
        """Rank 0 builds (or reads) the pool index of every method ``variants`` retrieve with and, when one
        adds KG sentences, the knowledge stage (its KG store), while the other processes wait: they then
        read them from the caches, never building them a second time. ``progress``: a step per index and
        one for the knowledge stage."""
        if self.processes.is_zero:
            for method in sorted({v.retrieval for v in variants if v.retrieval != "none"}):
                entry = entry_named(self.retrievers, method, "retrieval")
                _ = self.index(method) if entry.shards else self.retriever(method)
                _step(progress, f"pool index ({method}) ready")
            if any(v.knowledge and v.retrieval != "none" for v in variants):
                _ = self.enhancer
                _step(progress, "knowledge stage loaded")
        self.processes.barrier()

    def hits(self, queries: Sequence[str], method: str) -> list[list[Hit]]:
        """Every query's hits by ``method``, in query order, on every process: each ranks its share of
        whole batches of ``retrieval.query_batch_size`` queries (fewer batches than processes: the first
        processes rank one each); a retriever that does not shard, such as BM25, ranks them all on rank 0."""
        processes = self.processes
        if entry_named(self.retrievers, method, "retrieval").shards:
            share = processes.share(len(queries), self.retrieval.query_batch_size)
        else:
            share = range(len(queries)) if processes.is_zero else range(0)
        mine = self.retriever(method).retrieve([queries[i] for i in share]) if share else []
        self.queries_retrieved += len(share)
        return [hits for part in processes.gather(mine) for hits in part]

    def enhance(self, queries: Sequence[str], pairs: Sequence[list[QAPair]]) -> list[EnhancedContext]:
        """Every query's enhanced context, in query order, on every process; each process enhances (or
        reads from the cache) its contiguous share."""
        share = self.processes.share(len(queries))
        mine = (
            self.enhancer.enhance_batch([queries[i] for i in share], [pairs[i] for i in share])
            if share
            else []
        )
        self.queries_enhanced += len(share)
        contexts = [context for part in self.processes.gather(mine) for context in part]
        self.contexts_enhanced += len(contexts)
        self.facts_by_source.update(fact.source for context in contexts for fact in context.facts)
        return contexts

    def silent_sources(self) -> list[str]:
        """A warning line per plug-in knowledge source that gave no fact to any context enhanced so far."""
        return silent_plugins(self.knowledge, self.facts_by_source, self.contexts_enhanced)

    def enhanced_contexts(self, queries: Sequence[str]) -> list[EnhancedContext]:
        """Every query's context C ⊕ S: the pairs ``retrieval.method`` retrieves, and their KG sentences."""
        hits = self.hits(queries, self.retrieval.method)
        contexts = self.enhance(queries, [pairs_for_hits(h, self.pool) for h in hits])
        self.silent_warning.check(self)
        return contexts

    def contexts(
        self, queries: Sequence[str], hits: list[list[Hit]], with_knowledge: bool
    ) -> list[RetrievedContext]:
        """Per query: its ``hits``, their pairs, and KG sentences when ``with_knowledge``."""
        pairs = [pairs_for_hits(h, self.pool) for h in hits]
        if with_knowledge:
            enhanced = self.enhance(queries, pairs)
            return [
                RetrievedContext(h, e.pairs, e.sentences, e.kg_lost_entities, e)
                for h, e in zip(hits, enhanced, strict=True)
            ]
        budget = self.knowledge.token_budget
        return [
            RetrievedContext(h, fit_budget(p, [], budget, self.count_tokens)[0], [])
            for h, p in zip(hits, pairs, strict=True)
        ]

    def knowledge_summary(self) -> str:
        """``""``, or the knowledge stage's KG requests and losses so far, summed over its sources
        (``knowledge.backend`` and ``knowledge.also``) and over the processes."""
        mine = [kg.stats.to_json() for kg in self._enhancer.kgs] if self._enhancer else []
        present = [stats for rank in self.processes.gather(mine) for stats in rank]
        if not present:
            return ""
        total = {key: sum(stats[key] for stats in present) for key in present[0]}
        text = (
            f"; KG: {total['sparql_requests']} requests, {total['retried']} retried, "
            f"{total['split_requests']} split, {total['cache_hits']} cache hits, "
            f"{total['malformed_responses']} malformed responses"
        )
        if total["lost_entities"]:
            text += f", {total['lost_entities']} entities lost (kg_lost_entities; the next run asks again)"
        return text

    def for_variants(
        self, variants: Sequence[Variant], queries: Sequence[str], progress: Progress | None = None
    ) -> dict[str, list[RetrievedContext]]:
        """Per variant name, per query: what the variant's retrieval gave (the prompt shows what the variant
        adds, see :func:`graphctx.prompts.build_prompt`). ``progress``: advanced by a step after each of
        :func:`context_steps` (on rank 0 only, where the indexes are built)."""
        self.prepare(variants, progress)
        hits: dict[str, list[list[Hit]]] = {}
        needed: dict[tuple[str, bool], list[RetrievedContext]] = {}
        for variant in variants:
            if variant.retrieval != "none":
                if variant.retrieval not in hits:
                    hits[variant.retrieval] = self.hits(queries, variant.retrieval)
                    _step(progress, f"{len(queries)} queries retrieved ({variant.retrieval})")
                key = (variant.retrieval, variant.knowledge)
                if key not in needed:
                    needed[key] = self.contexts(queries, hits[variant.retrieval], variant.knowledge)
                    kind = "enhanced with KG facts" if variant.knowledge else "fitted to the budget"
                    _step(progress, f"{len(queries)} contexts {kind} ({variant.retrieval})")
        result = {}
        for variant in variants:
            if variant.retrieval == "none":
                result[variant.name] = [RetrievedContext([], [], []) for _ in queries]
            else:
                result[variant.name] = needed[(variant.retrieval, variant.knowledge)]
        self.silent_warning.check(self)
        return result


def _step(progress: Progress | None, note: str) -> None:
    if progress is not None:
        progress.advance(1, note)
