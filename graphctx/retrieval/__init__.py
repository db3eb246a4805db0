"""Retrieval of past questions: embeddings, the question graph and batched personalized PageRank.

Modules (imported directly, so that reading the settings stays cheap):

- ``settings``: :class:`RetrievalSettings` (the ``retrieval:`` config section).
- ``encoder``: :class:`SentenceEncoder`, a sentence-transformers model folder run on plain transformers.
- ``embeddings``: sentence embeddings of pool questions and queries, cached by model + texts.
- ``graph``: the question graph (cosine > T) as a ``torch_geometric.data.Data``; query edges.
- ``pagerank``: :class:`PoolPageRank`, networkx-exact personalized PageRank for many queries at once.
- ``dense``: cosine top-k (TextGen baseline), optional FAISS index.
- ``index``: :class:`RetrievalIndex` (ids, embeddings, graph) built once and cached.
- ``retriever``: :class:`Hit`, the ``Retriever`` protocol, graph and dense retrievers.
- ``module``: :class:`RetrievalModule`, a LightningModule so ``trainer.predict`` shards queries over DDP
  processes (plain ``trainer.predict`` returns only this process's share), and ``predict_hits(trainer,
  module, queries)``, which deals whole query batches to the processes and gathers the shares back: one hit
  list per query, in query order, on every process, equal to a single-process run bit for bit.
"""
