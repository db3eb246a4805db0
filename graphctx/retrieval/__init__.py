"""Retrieval of past questions: embeddings, the question graph and batched personalized PageRank.

The paper's path reads embed (``embeddings``) → threshold graph (``graph``) → power iteration
(``pagerank``), put together by ``builders`` from the settings. The scale modes (k-NN graph build, forward
push, sharded embedding, incremental updates) live in :mod:`graphctx.retrieval.scale`: the paper's path
enters them from ``builders`` alone (``settings`` only holds their section).

The algorithms take plain arguments (``alpha``, ``tol``, ``max_iter``, ``k``, ``threshold``, ``dtype``,
``device``, ...); settings objects stop at the builders (``builders``, ``index``, ``retriever``),
which read the ``retrieval:`` section once. Modules (imported directly, so that reading the settings stays
cheap):

- ``settings``: :class:`RetrievalSettings` (the ``retrieval:`` config section).
- ``numerics``: device, dtypes and CPU threads, which change the numbers (named in cache keys).
- ``encoder``: :class:`SentenceEncoder`, a sentence-transformers model folder run on plain transformers.
- ``embeddings``: sentence embeddings of pool questions and queries, cached by model + texts.
- ``graph``: the question graph (cosine > T) as a ``torch_geometric.data.Data``; query edges.
- ``components``: connected components; the pool's nodes and edges grouped by component.
- ``layout``: which queries PageRank iterates together, over which copies of the components.
- ``pagerank``: :class:`PoolPageRank`, networkx-exact personalized PageRank for many queries at once.
- ``ranking``: the ranking rule (score high to low, near-ties in pool order).
- ``dense``: cosine top-k (TextGen baseline), optional FAISS index.
- ``builders``: each algorithm's arguments read from :class:`RetrievalSettings`; the branch point of the
  scale modes.
- ``index``: :class:`RetrievalIndex` (ids, embeddings, graph) built once and cached.
- ``retriever``: :class:`Hit`, the ``Retriever`` protocol, graph and dense retrievers.
- ``scale``: the scale modes and their settings (``retrieval.scale``).
"""
