"""Knowledge-graph backends behind one interface: surfaces in → ids; ids in → labelled one-hop facts.

Both backends run the *same* SPARQL (:mod:`graphctx.knowledge.sparql`); they differ only in where a query
goes: :class:`~graphctx.knowledge.store.LocalKnowledgeGraph` asks an embedded pyoxigraph store,
:class:`~graphctx.knowledge.wikidata.WikidataKnowledgeGraph` a live endpoint over HTTP.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable, Sequence

from graphctx.knowledge.entities import normalise_entity
from graphctx.knowledge.sparql import KGFact, facts_from_rows, label_query, one_hop_query

LINK_BATCH = 100
"""Surfaces per label-lookup query (keeps each VALUES block and response small)."""

MAX_IDS_PER_SURFACE = 5
"""Most KG nodes one surface may link to (e.g. 'nginx' the software and 'nginx' the Debian package)."""


def surface_variants(surface: str) -> list[str]:
    """Exact-match candidates for a label lookup: as written, normalised, and capitalised."""
    key = normalise_entity(surface)
    return list(dict.fromkeys(v for v in (surface.strip(), key, key[:1].upper() + key[1:]) if v))


class SparqlKnowledgeGraph(ABC):
    """Linking and one-hop retrieval over any SPARQL source that answers :meth:`select`."""

    name: str

    def __init__(self, language: str = "en", max_facts_per_entity: int = 200) -> None:
        self.language = language
        self.max_facts_per_entity = max_facts_per_entity

    @abstractmethod
    def select(self, query: str) -> list[dict[str, str]]:
        """Rows ``{variable: value}`` of a SELECT query."""

    def link(self, surfaces: Iterable[str]) -> dict[str, list[str]]:
        """Normalised surface → sorted KG ids whose label or alias equals one of its variants."""
        variant_owner: dict[str, set[str]] = defaultdict(set)
        for surface in surfaces:
            key = normalise_entity(surface)
            if key:
                for variant in surface_variants(surface):
                    variant_owner[variant].add(key)
        links: dict[str, set[str]] = defaultdict(set)
        variants = list(variant_owner)
        for start in range(0, len(variants), LINK_BATCH):
            chunk = variants[start : start + LINK_BATCH]
            query = label_query(chunk, self.language, limit=len(chunk) * MAX_IDS_PER_SURFACE * 4)
            for row in self.select(query):
                for key in variant_owner.get(row["surface"], ()):
                    links[key].add(row["item"])
        return {key: sorted(ids)[:MAX_IDS_PER_SURFACE] for key, ids in links.items()}

    def one_hop(self, ids: Sequence[str]) -> list[KGFact]:
        """Every labelled edge leaving ``ids``, in a deterministic order."""
        if not ids:
            return []
        ids = sorted(set(ids))
        query = one_hop_query(ids, self.language, limit=len(ids) * self.max_facts_per_entity)
        facts = set(facts_from_rows(self.select(query)))
        return sorted(facts, key=lambda f: (f.head_label, f.relation_label, f.tail_label, f.tail_id))
