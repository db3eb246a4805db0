"""The retriever registry: every way of picking a query's past Q&A pairs, built in or plugged in from a
user's package, is a :class:`RetrieverEntry` that says what it reads of the pool and how it is built.

Built in: ``graph`` (personalized PageRank on the question graph, the paper's), ``dense`` (cosine top-k,
the paper's TextGen), ``bm25`` and ``hybrid`` (PPR+BM25 reciprocal rank fusion), the last two the same
rankings ``graphctx retrieval-eval`` judges. A config adds its own LightningCLI style::

    retrieval:
      extra:
        - class_path: mypkg.retrievers.TagOverlap
          init_args: {min_shared: 1}

and answers with any retriever through a variant named ``<variant>@<retriever>`` (``TextGen@bm25``: the
TextGen prompt, BM25's pairs), compared by default with ``<variant>`` itself.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from graphctx.errors import ConfigError
from graphctx.plugins import checked_method, load_plugins, plugin_name, running, source_fingerprint
from graphctx.retrieval.settings import RetrievalSettings

if TYPE_CHECKING:  # the retrievers import torch: only when one is built
    from graphctx.retrieval.encoder import SentenceEncoder
    from graphctx.retrieval.index import RetrievalIndex
    from graphctx.retrieval.retriever import Hit, QueryEmbedder, Retriever

FUSION_DEPTH = 100
"""How deep ``hybrid`` ranks with each of PageRank and BM25 before fusing (retrieval-eval's default)."""


@dataclass(frozen=True)
class PoolView:
    """What a retriever may read of the pool: ids and question texts in pool order, the embedded index
    of ``graph`` or ``dense`` (built once, then read from the cache), the device this process embeds and
    ranks on (None: ``retrieval.device``), where the queries are embedded already (retrieval-eval),
    their embeddings by text (None: the retriever embeds them), and a query encoder already loaded (None:
    the retriever loads its own)."""

    ids: list[int]
    texts: list[str]
    index: Callable[[str], RetrievalIndex]
    device: str | None = None
    embedded: QueryEmbedder | None = None
    encoder: SentenceEncoder | None = None


class RetrieverEntry:
    """One retriever: its name, what it reads, and how it is built over the pool."""

    name: ClassVar[str]
    """Its name in ``retrieval.method`` and in variant names (``TextGen@<name>``)."""
    summary: ClassVar[str] = ""
    """What it ranks by, for ``graphctx plan``."""
    embeds: ClassVar[bool] = True
    """Reads the embedded pool (so the embedding model loads)."""
    shards: ClassVar[bool] = False
    """Built on every rank, each ranking its share of whole query batches; otherwise rank 0 ranks them
    all."""
    paper: ClassVar[bool] = False
    """One of the paper's retrievers."""
    uses_threshold: ClassVar[bool] = False
    """Ranks on the question graph built at ``retrieval.threshold`` (retrieval-eval shows its T)."""

    def __init__(self, settings: RetrievalSettings) -> None:
        self.settings = settings

    def build(self, pool: PoolView) -> Retriever:
        """The retriever over ``pool``, in this process."""
        raise NotImplementedError

    def fingerprint(self) -> dict[str, Any]:
        """What its hits depend on beyond the ``retrieval`` settings (a plug-in: its code and arguments)."""
        return {}


class GraphEntry(RetrieverEntry):
    name = "graph"
    summary = "personalized PageRank on the question graph"
    shards = True
    paper = True
    uses_threshold = True

    def build(self, pool: PoolView) -> Retriever:
        """The embedding retriever of this name (:func:`~graphctx.retrieval.retriever.build_retriever`)."""
        from graphctx.retrieval.retriever import build_retriever

        settings = dataclasses.replace(self.settings, method=self.name)
        return build_retriever(
            pool.index(self.name), settings, pool.encoder, device=pool.device, embedded=pool.embedded
        )


class DenseEntry(GraphEntry):
    name = "dense"
    summary = "cosine top-k over the pool"
    uses_threshold = False


class BM25Entry(RetrieverEntry):
    name = "bm25"
    summary = "BM25 over the pool's question texts (bm25s, Lucene variant, stemmed)"
    embeds = False

    def build(self, pool: PoolView) -> Retriever:
        from graphctx.retrieval.bm25 import BM25Retriever

        return BM25Retriever(pool.ids, pool.texts, self.settings.top_k)


class HybridEntry(RetrieverEntry):
    name = "hybrid"
    summary = f"reciprocal rank fusion (c=60) of graph and bm25, each {FUSION_DEPTH} deep"
    uses_threshold = True

    def build(self, pool: PoolView) -> Retriever:
        from graphctx.retrieval.bm25 import BM25Retriever
        from graphctx.retrieval.hybrid import HybridRetriever
        from graphctx.retrieval.retriever import build_retriever

        deep = dataclasses.replace(self.settings, method="graph", top_k=FUSION_DEPTH)
        graph = build_retriever(
            pool.index("graph"), deep, pool.encoder, device=pool.device, embedded=pool.embedded
        )
        lexical = BM25Retriever(pool.ids, pool.texts, FUSION_DEPTH)
        return HybridRetriever(graph, lexical, self.settings.top_k, FUSION_DEPTH)


BUILT_IN: tuple[type[RetrieverEntry], ...] = (GraphEntry, DenseEntry, BM25Entry, HybridEntry)


class PluginRetriever(RetrieverEntry):
    """The base of a plug-in retriever: subclass it, set ``name``, implement :meth:`build`. Its fingerprint
    is its class path, its ``init_args`` and the SHA-256 of its package's sources. What it builds and ranks
    is checked (:class:`CheckedRetriever`); an exception it raises is one line naming it."""

    embeds = False
    class_path: str
    init_args: dict[str, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        build = cls.__dict__.get("build")
        if build is not None and not getattr(build, "checked", False):
            cls.build = checked_method(build, CheckedRetriever.of, WHERE)  # type: ignore[method-assign]

    def fingerprint(self) -> dict[str, Any]:
        return source_fingerprint(self)


WHERE = "retrieval.extra"


class CheckedRetriever:
    """A plug-in's retriever whose hits are checked: one list per query, each of :class:`Hit` s of pool
    ids with finite scores; anything else is one ``ConfigError`` naming the plug-in."""

    def __init__(self, entry: PluginRetriever, retriever: Retriever, ids: frozenset[int]) -> None:
        self.what = f"{WHERE} {plugin_name(entry)}"
        self.retriever = retriever
        self.ids = ids

    @classmethod
    def of(cls, entry: PluginRetriever, retriever: Any, args: tuple) -> CheckedRetriever:
        """``retriever`` as :meth:`PluginRetriever.build` made it over the pool ``args[0]``, checked."""
        if not callable(getattr(retriever, "retrieve", None)):
            raise ConfigError(
                f"{WHERE} {plugin_name(entry)}: build() returned {type(retriever).__name__}, not a retriever "
                "(an object with retrieve(queries) -> list[list[Hit]])"
            )
        return cls(entry, retriever, frozenset(args[0].ids))

    def problem(self, hit: Any) -> str | None:
        """What is wrong with one hit (None: nothing)."""
        from graphctx.retrieval.retriever import Hit

        if not isinstance(hit, Hit):
            return f"{hit!r} is not a graphctx.retrieval.retriever.Hit"
        if hit.id not in self.ids:
            return f"id {hit.id!r} is not in the pool"
        if not isinstance(hit.score, int | float) or not math.isfinite(hit.score):
            return f"score {hit.score!r} of id {hit.id} is not a finite number"
        return None

    def retrieve(self, queries: Sequence[str]) -> list[list[Hit]]:
        with running(self.what):
            found = self.retriever.retrieve(queries)
        if not isinstance(found, list) or len(found) != len(queries):
            count = len(found) if isinstance(found, list) else type(found).__name__
            raise ConfigError(f"{self.what}: retrieve() gave {count} hit lists for {len(queries)} queries")
        for number, hits in enumerate(found):
            problems = [self.problem(hit) for hit in hits] if isinstance(hits, list) else ["not a list"]
            problem = next((p for p in problems if p is not None), None)
            if problem is not None:
                raise ConfigError(f"{self.what}: retrieve()'s hit list {number}: {problem}")
        return found


def retriever_entries(settings: RetrievalSettings) -> dict[str, RetrieverEntry]:
    """Every retriever of a config by name: the built-ins, then ``retrieval.extra`` in its order."""
    entries: dict[str, RetrieverEntry] = {cls.name: cls(settings) for cls in BUILT_IN}
    plugins = load_plugins(settings.extra, PluginRetriever, "retrieval.extra", entries, settings)
    return entries | {entry.name: entry for entry in plugins}


def entry_named(entries: Mapping[str, RetrieverEntry], name: str, where: str) -> RetrieverEntry:
    if name not in entries:
        raise ConfigError(f"{where}: unknown retriever {name!r}; choose from {sorted(entries)}")
    return entries[name]
