"""The scale modes of retrieval (the ``retrieval.scale:`` section), for pools of millions of questions;
off by default, when the paper's path runs: embed, threshold graph, power iteration.

Entered only from :mod:`graphctx.retrieval.builders` (through :mod:`.builders` here); the modules here may
use the paper's path, never the reverse. Modules (imported directly):

- ``settings``: :class:`ScaleSettings` (the ``retrieval.scale:`` config section).
- ``builders``: each scale mode's arguments read from the settings (the branch point's other side).
- ``knn``: ``graph_build: knn``, the approximate question graph from Faiss nearest neighbours, its recall.
- ``push``: ``ppr: push``, forward-push personalized PageRank on the CPU (:class:`PoolPush`);
  ``push_kernel``: its numba loops; ``push_frontier``: its torch twin for the GPU (:class:`FrontierPush`).
- ``shards``: the pool embedded in shards by many processes (``graphctx index --shards``).
- ``incremental``: questions added to a cached index without a rebuild (``graphctx index --add``).
- ``updates``: edits and deletions of a cached index (``graphctx index --edit/--delete``, the live pool).
"""
