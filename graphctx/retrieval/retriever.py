"""Retrievers: rank past questions for new ones, by personalized PageRank (graph) or by cosine (dense)."""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple, Protocol

import torch
from torch import Tensor

from graphctx.retrieval.builders import build_encoder, build_pagerank, build_query_edges
from graphctx.retrieval.dense import FaissIndex, dense_top_k
from graphctx.retrieval.embeddings import encode
from graphctx.retrieval.encoder import SentenceEncoder
from graphctx.retrieval.graph import density_warning
from graphctx.retrieval.index import RetrievalIndex
from graphctx.retrieval.numerics import pinned_threads, resolve_device
from graphctx.retrieval.settings import RetrievalSettings

QueryEmbedder = Callable[[Sequence[str]], Tensor]
"""Query texts → their normalised embeddings, one row each."""


class Hit(NamedTuple):
    """One retrieved past question (a named tuple, so Lightning's predict loop can carry it)."""

    id: int
    """The question's id in the pool."""
    score: float
    """PageRank score (graph) or cosine (dense and fallback hits)."""
    fallback: bool = False
    """True when the hit comes from cosine ranking because PageRank had nothing to rank (the query has no
    edge above the threshold, or reaches fewer than ``top_k`` pool questions)."""


class Retriever(Protocol):
    """Anything that ranks pool questions for queries."""

    def retrieve(self, queries: Sequence[str]) -> list[list[Hit]]:
        """Ranked hits, best first, for each query."""
        ...


class EmbeddingRetriever(ABC):
    """Shared part: the pool index, the query encoder, batching of queries.

    The settings are read here, once: the encoder's (loaded on first use unless ``encoder`` is given),
    the query batch size, ``top_k``, the tie rule and the CPU threads; ``device`` defaults to
    ``settings.device``. ``embedded``: the query embeddings of texts embedded already (retrieval-eval's
    queries, embedded once as the pool is), in place of the encoder.
    """

    def __init__(
        self,
        index: RetrievalIndex,
        settings: RetrievalSettings,
        encoder: SentenceEncoder | None = None,
        device: str | torch.device | None = None,
        embedded: QueryEmbedder | None = None,
    ) -> None:
        self.device = torch.device(device) if device is not None else resolve_device(settings.device)
        self.index = index.to(self.device)
        self.top_k, self.query_batch_size = settings.top_k, settings.query_batch_size
        self.cpu_threads, self.tie_tolerance = settings.cpu_threads, settings.tie_tolerance
        self.chunk_size = settings.similarity_chunk_size
        self.instruction, self.embedding_batch_size = settings.instruction, settings.embedding_batch_size
        self._load_encoder = partial(build_encoder, settings, self.device)
        self._encoder = encoder
        self._embedded = embedded
        self.faiss_index: FaissIndex | None = None

    @property
    def encoder(self) -> SentenceEncoder:
        """The query encoder (loaded on first use)."""
        if self._encoder is None:
            self._encoder = self._load_encoder()
        return self._encoder

    def embed(self, queries: Sequence[str]) -> Tensor:
        """Normalised query embeddings (embedded as pool questions are) on the retriever's device."""
        if self._embedded is not None:
            return self._embedded(queries).to(self.device)
        embeddings = encode(
            self.encoder,
            queries,
            instruction=self.instruction,
            batch_size=self.embedding_batch_size,
            cpu_threads=self.cpu_threads,
        )
        return embeddings.to(self.device)

    def retrieve(self, queries: Sequence[str]) -> list[list[Hit]]:
        """Ranked hits for each query, ``query_batch_size`` queries at a time."""
        hits: list[list[Hit]] = []
        step = self.query_batch_size
        for start in range(0, len(queries), step):
            hits.extend(self.rank(self.embed(queries[start : start + step])))
        return hits

    def rank(self, query_embeddings: Tensor) -> list[list[Hit]]:
        """Ranked hits for already-embedded queries (on ``cpu_threads`` threads on the CPU)."""
        with pinned_threads(self.cpu_threads, self.device):
            return self._rank(query_embeddings)

    @abstractmethod
    def _rank(self, query_embeddings: Tensor) -> list[list[Hit]]:
        """:meth:`rank` of the method."""

    def _dense_hits(self, query_embeddings: Tensor, fallback: bool) -> list[list[Hit]]:
        scores, nodes = dense_top_k(
            query_embeddings,
            self.index.embeddings,
            self.top_k,
            chunk_size=self.chunk_size,
            tolerance=self.tie_tolerance,
            faiss_index=self.faiss_index,
        )
        ids = self.index.ids[nodes].tolist()
        return [
            [Hit(id, score, fallback) for id, score in zip(row_ids, row_scores, strict=True)]
            for row_ids, row_scores in zip(ids, scores.tolist(), strict=True)
        ]


class DenseRetriever(EmbeddingRetriever):
    """Exact cosine top-k over the pool (the paper's TextGen); FAISS when ``settings.use_faiss``."""

    def __init__(
        self,
        index: RetrievalIndex,
        settings: RetrievalSettings,
        encoder: SentenceEncoder | None = None,
        device: str | torch.device | None = None,
        embedded: QueryEmbedder | None = None,
    ) -> None:
        super().__init__(index, settings, encoder, device, embedded)
        if settings.use_faiss:
            self.faiss_index = FaissIndex(self.index.embeddings)

    def _rank(self, query_embeddings: Tensor) -> list[list[Hit]]:
        return self._dense_hits(query_embeddings, fallback=False)


class GraphRetriever(EmbeddingRetriever):
    """Personalized PageRank from each query's node on the question graph (the paper's GraphGen).

    A query reaching fewer than ``top_k`` pool questions (none at all when no cosine exceeds the threshold)
    is topped up with its best cosine matches, marked ``fallback=True``. A graph without an edge, or a
    dense one, is reported on stderr (:func:`~graphctx.retrieval.graph.density_warning`).
    """

    def __init__(
        self,
        index: RetrievalIndex,
        settings: RetrievalSettings,
        encoder: SentenceEncoder | None = None,
        device: str | torch.device | None = None,
        embedded: QueryEmbedder | None = None,
    ) -> None:
        super().__init__(index, settings, encoder, device, embedded)
        warning = density_warning(self.index.stats, settings.threshold)
        if warning:
            print(warning, file=sys.stderr)
        with pinned_threads(self.cpu_threads, self.device):
            self.pagerank = build_pagerank(self.index.graph, settings)
        self.query_edges = partial(build_query_edges, settings=settings)

    def _rank(self, query_embeddings: Tensor) -> list[list[Hit]]:
        edges = self.query_edges(query_embeddings, self.index.embeddings)
        result = self.pagerank.rank(edges, self.top_k)
        ids = torch.where(result.node_ids >= 0, self.index.ids[result.node_ids.clamp_min(0)], -1).tolist()
        scores = result.scores.tolist()
        short = (result.node_ids < 0).any(1).nonzero()[:, 0]
        backup = dict(
            zip(short.tolist(), self._dense_hits(query_embeddings[short], fallback=True), strict=True)
        )
        hits = []
        for query, (row_ids, row_scores) in enumerate(zip(ids, scores, strict=True)):
            ranked = [Hit(id, score) for id, score in zip(row_ids, row_scores, strict=True) if id >= 0]
            taken = {hit.id for hit in ranked}
            extra = [hit for hit in backup.get(query, []) if hit.id not in taken]
            hits.append(ranked + extra[: self.top_k - len(ranked)])
        return hits


def build_retriever(
    index: RetrievalIndex,
    settings: RetrievalSettings,
    encoder: SentenceEncoder | None = None,
    device: str | torch.device | None = None,
    embedded: QueryEmbedder | None = None,
) -> EmbeddingRetriever:
    """The retriever named by ``settings.method`` (``embedded``: see :class:`EmbeddingRetriever`).

    Examples:
        >>> import tempfile
        >>> from graphctx.retrieval.index import build_index
        >>> settings = RetrievalSettings(device="cpu", threshold=0.7, top_k=1)
        >>> texts = ["How do I stake ADA?", "How to stake ADA", "What is a UTXO?"]
        >>> with tempfile.TemporaryDirectory() as cache:
        ...     retriever = build_retriever(build_index([7, 8, 9], texts, settings, cache), settings)
        >>> [hit.id for hit in retriever.retrieve(["staking ADA"])[0]]
        [8]
    """
    retrievers = {"graph": GraphRetriever, "dense": DenseRetriever}
    if settings.method not in retrievers:
        raise ValueError(f"retrieval.method must be one of {sorted(retrievers)}, got {settings.method!r}")
    return retrievers[settings.method](index, settings, encoder, device, embedded)
