"""Pick and open the knowledge-graph backend a config names (the local store or live Wikidata), and the
mention-linking gazetteer that goes with it."""

from __future__ import annotations

from graphctx.knowledge.kg import Gazetteer, SparqlKnowledgeGraph
from graphctx.knowledge.settings import KnowledgeSettings


def build_knowledge_graph(settings: KnowledgeSettings) -> SparqlKnowledgeGraph:
    """The backend named by ``settings.backend`` (the local store is built on first use, then cached)."""
    if settings.backend == "local":
        from graphctx.knowledge.store import LocalKnowledgeGraph

        return LocalKnowledgeGraph.from_settings(settings)
    if settings.backend == "wikidata":
        from graphctx.knowledge.wikidata import WikidataKnowledgeGraph

        return WikidataKnowledgeGraph.from_settings(settings)
    if settings.backend == "tagwiki":
        from graphctx.knowledge.tagwiki import TagWikiKnowledgeGraph

        return TagWikiKnowledgeGraph.from_settings(settings)
    raise ValueError(f"knowledge.backend: unknown backend {settings.backend!r} (local | wikidata | tagwiki)")


def build_gazetteer(settings: KnowledgeSettings, kg: SparqlKnowledgeGraph | None = None) -> Gazetteer:
    """The local store's gazetteer (``backend: local``), else one read through ``kg`` (built if not given)."""
    if settings.backend == "local":
        from graphctx.knowledge.store import load_gazetteer

        return Gazetteer(load_gazetteer(settings))
    return Gazetteer(kg=kg if kg is not None else build_knowledge_graph(settings))
