"""Settings of the scale modes (the ``retrieval.scale:`` section of a config): off by default, the paper's
exact graph and power iteration run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from graphctx.checks import AT_LEAST_ONE, POSITIVE, Range, check_own_fields


@dataclass
class ScaleSettings:
    """Approximations for pools of millions of questions: a k-NN question graph and forward-push PageRank.

    Defaults are the paper's exact build and networkx-exact power iteration, so the section can be left out.
    """

    RANGES: ClassVar[dict[str, Range]] = {
        "knn_k": AT_LEAST_ONE,
        "knn_recall_sample": AT_LEAST_ONE,
        "knn_nprobe": AT_LEAST_ONE,
        "ppr_eps": POSITIVE,
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

    graph_build: Literal["exact", "knn"] = "exact"
    """``exact``: every pair above the threshold (chunked products, the paper); ``knn``: approximate, each
    question's ``knn_k`` nearest neighbours by Faiss kept above the threshold (for pools of millions; the
    index stats record the sampled recall of above-threshold edges)."""

    knn_k: int = 64
    """``graph_build: knn``: neighbours searched per question (a node keeps at most these plus those that
    chose it)."""

    knn_nprobe: int = 8
    r"""``graph_build: knn``: inverted lists of the Faiss index searched per question (of about
    :math:`4\sqrt N`; more: higher recall, slower build)."""

    knn_recall_sample: int = 1000
    """``graph_build: knn``: nodes drawn (seed 0) whose exact above-threshold edges measure the recall."""

    ppr: Literal["power", "push"] = "power"
    """``power``: networkx-exact power iteration (the paper); ``push``: approximate forward push with
    residual tolerance ``ppr_eps`` (cost set by the query's neighbourhood, not the pool)."""

    ppr_eps: float = 1e-6
    """``ppr: push``: push while a node's residual exceeds ``ppr_eps`` times its weighted degree; every
    score is then at most ``ppr_eps * degree`` below the exact one (1e-6: top-10 equal to power
    iteration's on clustered pools, where neighbours' scores differ by about 1e-4; 1e-4 gets 0.71)."""

    def index_key_parts(self) -> list[object]:
        """What the build adds to the index's cache key: nothing for ``exact``, so that entries made before
        the scale modes existed stay valid; for ``knn`` its k, nprobe and recall sample, so that a k-NN
        index never reuses an exact entry.

        Examples:
            >>> ScaleSettings().index_key_parts(), ScaleSettings(graph_build="knn", knn_k=8).index_key_parts()
            ([], ['knn', 8, 8, 1000])
        """
        if self.graph_build == "exact":
            return []
        return ["knn", self.knn_k, self.knn_nprobe, self.knn_recall_sample]
