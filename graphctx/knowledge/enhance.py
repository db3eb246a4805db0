"""KG-driven context enhancement (the paper's second stage), batched and cached.

For a query with retrieved pairs C:

1. τ^init: triplets extracted from each pair (question + accepted answer) by the union of the configured
   extractors;
2. Ent(C): heads and tails of τ^init, plus KG labels mentioned in C (``link_mentions``), normalised and
   linked to KG ids;
3. one hop: every labelled edge leaving a linked entity;
4. τ' = { (h, r, t) in one hop : t ∈ Ent(C) }  and  τ^f = τ^init ∪ τ'; by default (``kg_query:
   between``) the KG is asked for τ' directly: the edges from Ent(C)'s heads to the ids of Ent(C)
   (every id its keys link to, so a tail matched by its label is asked for too);
5. S = verbalise(τ^f), KG facts τ' first (they are the new information; τ^init restates C and is trimmed
   first), and C_enc = C ⊕ S under ``token_budget``.

The whole batch shares bounded KG requests (:mod:`graphctx.knowledge.batches`). Entities whose requests
failed even alone are listed per query in ``kg_lost_entities``; such a context is not cached, so the next
run asks again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphctx.cache import cache_root, fingerprint, read_entry, write_json_atomic
from graphctx.knowledge.backends import also_fingerprints, build_gazetteer, build_knowledge_graphs
from graphctx.knowledge.budget import QAPair, TokenCounter, fit_budget, render
from graphctx.knowledge.entities import EntitySet, normalise_entity
from graphctx.knowledge.extractors import (
    build_extractor,
    plugin_fingerprints,
    selected_extractors,
    uses_generation_model,
)
from graphctx.knowledge.kg import MAX_IDS_PER_SURFACE, Gazetteer, Lookup, SparqlKnowledgeGraph
from graphctx.knowledge.mentions import MentionMatcher
from graphctx.knowledge.provenance import SourcedFact, sourced_facts
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.spacy_load import load_spacy
from graphctx.knowledge.sparql import KGFact
from graphctx.knowledge.triplets import ExtractorUnion, Triplet, TripletExtractor
from graphctx.knowledge.verbalise import Sentence, fact_to_triplet, verbalise

if TYPE_CHECKING:
    from graphctx.knowledge.llm import GenerationModel

CONTEXT_FORMAT = 3
"""Bump when the enhanced context changes shape: part of the cache key. 3: τ^init and τ' kept
(``extracted``, ``facts``)."""


@dataclass(frozen=True)
class EnhancedContext:
    """C_enc for one query: the text, the pairs and sentences kept under the budget, and all of τ^f; and
    where it came from: τ^init per pair (``extracted``) and τ' with its KG ids (``facts``)."""

    text: str
    pairs: list[QAPair]
    triplets: list[Triplet]
    sentences: list[Sentence]
    kg_lost_entities: list[str] = field(default_factory=list)
    """Entities (surface keys, KG ids) whose KG lookups failed: their facts are missing here."""
    extracted: list[Triplet] = field(default_factory=list)
    """τ^init: every extractor's triplets, ``source`` naming the extractors and the pair
    (``spacy@pair=0``)."""
    facts: list[SourcedFact] = field(default_factory=list)
    """τ': the KG facts whose tail is in Ent(C), each with its backend and sentence."""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> EnhancedContext:
        return cls(
            text=payload["text"],
            pairs=[QAPair(**p) for p in payload["pairs"]],
            triplets=[Triplet(**t) for t in payload["triplets"]],
            sentences=[Sentence(s["text"], Triplet(**s["triplet"])) for s in payload["sentences"]],
            kg_lost_entities=payload["kg_lost_entities"],
            extracted=[Triplet(**t) for t in payload["extracted"]],
            facts=[SourcedFact(KGFact(**f["fact"]), f["source"], f["sentence"]) for f in payload["facts"]],
        )


def filter_one_hop(facts: Sequence[KGFact], entities: EntitySet) -> list[KGFact]:
    """τ': the one-hop facts whose tail is in Ent(C) (by KG id, else by normalised label); no self-loops."""
    return [f for f in facts if f.tail_id != f.head_id and entities.contains(f.tail_id, f.tail_label)]


def combine(
    extracted: Sequence[Triplet], kg_triplets: Sequence[Triplet], include_extracted: bool
) -> list[Triplet]:
    """τ^f = τ' ∪ τ^init (KG facts first), duplicates removed, order kept."""
    return list(dict.fromkeys([*kg_triplets, *(extracted if include_extracted else ())]))


_NOT_IN_CACHE_KEY = {
    "batch_size",
    "device",
    "sparql_timeout_s",
    "sparql_retries",
    "sparql_min_interval_s",
    "sparql_batch_values",
    "sparql_parallel",
    "sparql_max_failure_share",
    "user_agent",
    "extra",  # the plug-in sources: the selected one is in the key by its name and fingerprint
    "extractors_extra",  # the plug-in extractors: those named in ``extractors`` by their fingerprints
    "cache_dir",  # where the cache lies
    "kg_dir",  # where the local store's files lie: the store's key hashes their bytes (its folder's name)
    "ntriples",
}
"""Settings that change how the KG is asked or where its files lie, not what the context holds."""


def _kg_identity(kg: SparqlKnowledgeGraph) -> str:
    """Which store or endpoint a KG reads: its store folder's name, or the endpoint URL."""
    identity = str(getattr(kg, "path", getattr(getattr(kg, "client", None), "endpoint", "")))
    return Path(identity).name or identity


def _read_context(path: Path) -> EnhancedContext:
    """A cached :class:`EnhancedContext`."""
    return EnhancedContext.from_json(json.loads(path.read_text()))


class Enhancer:
    """Turns (query, retrieved pairs) into :class:`EnhancedContext`; see the module docstring."""

    def __init__(
        self,
        settings: KnowledgeSettings,
        extractor: TripletExtractor,
        kg: SparqlKnowledgeGraph,
        matcher: MentionMatcher | None,
        count_tokens: TokenCounter,
        cache_dir: Path | None = None,
        model_identity: str = "",
        gazetteer: Gazetteer | None = None,
        also: Sequence[SparqlKnowledgeGraph] = (),
    ) -> None:
        self.settings = settings
        self.extractor = extractor
        self.kg = kg
        self.kgs = [kg, *also]
        """The knowledge graphs asked for facts: ``knowledge.backend``'s, then ``knowledge.also``'s."""
        self.matcher = matcher
        self.count_tokens = count_tokens
        self.cache_dir = cache_dir
        self.model_identity = model_identity
        """The generation model's identity when it is the LLM extractor: part of the cache key."""
        self.gazetteer = gazetteer
        """The matcher's gazetteer, when it is read through the KG (its lost keys are reported)."""
        self.extractor_plugins = plugin_fingerprints(settings)
        """The fingerprints of the plug-in extractors: part of the cache key."""
        self.also_plugins = also_fingerprints(settings) if also else {}
        """The fingerprints of the plug-in sources of ``knowledge.also``: part of the cache key."""

    @classmethod
    def from_settings(
        cls,
        settings: KnowledgeSettings,
        count_tokens: TokenCounter,
        generation_model: GenerationModel | None = None,
    ) -> Enhancer:
        """Build the extractors (``generation_model``: see :func:`build_extractor`), the KG backend and the
        mention matcher; ``count_tokens`` counts ``token_budget`` (see ``graphctx.knowledge.budget``)."""
        from graphctx.knowledge.mentions import english_words
        from graphctx.knowledge.spacy_extractor import SpacyExtractor

        kg, *also = build_knowledge_graphs(settings)
        needs_labels = settings.link_mentions or any(e.reads_labels for e in selected_extractors(settings))
        gazetteer = build_gazetteer(settings, [kg, *also]) if needs_labels else None
        extractor = build_extractor(settings, generation_model, gazetteer)
        members = extractor.extractors if isinstance(extractor, ExtractorUnion) else [extractor]
        matcher = None
        if settings.link_mentions and gazetteer is not None:
            spacy_members = [m for m in members if isinstance(m, SpacyExtractor)]
            matcher = next((m.matcher for m in spacy_members if m.matcher is not None), None)
            if matcher is None:
                matcher = MentionMatcher(
                    gazetteer.maps,
                    english_words(load_spacy(settings.spacy_model, "knowledge.spacy_model")),
                    resolve=gazetteer.matcher_resolve(),
                )
        return cls(
            settings,
            extractor,
            kg,
            matcher,
            count_tokens,
            cache_root(settings.cache_dir or None) / "enhanced",
            generation_model.identity if generation_model and uses_generation_model(settings) else "",
            gazetteer,
            also,
        )

    def _cache_file(self, query: str, pairs: Sequence[QAPair]) -> Path | None:
        if self.cache_dir is None:
            return None
        relevant = self.settings.identity(_NOT_IN_CACHE_KEY)
        if self.extractor_plugins:  # a plug-in extractor's code and arguments (built-ins: their keys stay)
            relevant["extractor_plugins"] = self.extractor_plugins
        if len(self.kgs) > 1:  # knowledge.also: each source's name, identity and plug-in fingerprint
            relevant["also_sources"] = [[kg.name, _kg_identity(kg)] for kg in self.kgs[1:]]
            relevant["also_plugins"] = self.also_plugins
        key = fingerprint(
            CONTEXT_FORMAT,
            relevant,
            self.kg.name,
            _kg_identity(self.kg),
            self.model_identity,
            self.count_tokens.name,
            query,
            [dataclasses.asdict(p) for p in pairs],
        )
        return self.cache_dir / f"{key}.json"

    def enhance(self, query: str, pairs: Sequence[QAPair]) -> EnhancedContext:
        """C_enc for one query (see :meth:`enhance_batch`)."""
        return self.enhance_batch([query], [pairs])[0]

    def enhance_batch(
        self, queries: Sequence[str], pairs_per_query: Sequence[Sequence[QAPair]]
    ) -> list[EnhancedContext]:
        """C_enc for each query: one extraction pass over all pair texts, one link and one one-hop query."""
        if len(queries) != len(pairs_per_query):
            raise ValueError(f"{len(queries)} queries but {len(pairs_per_query)} lists of retrieved pairs")
        results: list[EnhancedContext | None] = []
        todo: list[int] = []
        for index, (query, pairs) in enumerate(zip(queries, pairs_per_query, strict=True)):
            cache_file = self._cache_file(query, pairs)
            cached = None if cache_file is None else read_entry(cache_file, _read_context)
            results.append(cached)
            if cached is None:  # absent, or damaged (moved aside): computed again
                todo.append(index)
        for index, context in zip(todo, self._compute([pairs_per_query[i] for i in todo]), strict=True):
            results[index] = context
            cache_file = self._cache_file(queries[index], pairs_per_query[index])
            if cache_file is not None and not context.kg_lost_entities:
                write_json_atomic(cache_file, context.to_json())
        return [r for r in results if r is not None]

    def _extract(self, pairs_per_query: Sequence[Sequence[QAPair]]) -> dict[str, list[Triplet]]:
        texts = list(dict.fromkeys(f"{p.question}\n\n{p.answer}" for pairs in pairs_per_query for p in pairs))
        if not self.settings.enabled or not texts:
            return {}
        return dict(zip(texts, self.extractor.extract(texts), strict=True))

    def _compute(self, pairs_per_query: Sequence[Sequence[QAPair]]) -> list[EnhancedContext]:
        """C_enc per query, none of them cached: τ^init, Ent(C) linked, τ', then S under the budget."""
        extracted = self._extract(pairs_per_query)
        texts_per_query = [[f"{p.question}\n\n{p.answer}" for p in pairs] for pairs in pairs_per_query]
        init_per_query = [_initial_triplets(texts, extracted) for texts in texts_per_query]
        candidates_per_query = self._prepare_matcher(texts_per_query, init_per_query)
        surfaces_per_query = [
            self._surfaces(texts, init) for texts, init in zip(texts_per_query, init_per_query, strict=True)
        ]
        asked = {s for surfaces in surfaces_per_query for s in surfaces}
        links = [kg.link_all(asked) if self.settings.enabled else Lookup() for kg in self.kgs]
        capped: dict[str, list[str]] = {}
        for lookup in links:  # each source's ids (at most MAX_IDS_PER_SURFACE), the backend's first
            for key, ids in lookup.found.items():
                capped.setdefault(key, []).extend(
                    i for i in ids[:MAX_IDS_PER_SURFACE] if i not in capped[key]
                )
        links_lost = set().union(*(lookup.lost for lookup in links))
        entity_sets = [EntitySet.from_surfaces(surfaces, capped) for surfaces in surfaces_per_query]
        head_ids = [
            sorted({i for e in entities.linked()[: self.settings.max_entities] for i in e.ids})
            for entities in entity_sets
        ]
        facts_per_query, lost_heads = self._facts(head_ids, entity_sets, links)
        gazetteer_lost = self.gazetteer.lost if self.gazetteer is not None else set()
        contexts = []
        for pairs, init, entities, facts, lost, candidates in zip(
            pairs_per_query,
            init_per_query,
            entity_sets,
            facts_per_query,
            lost_heads,
            candidates_per_query,
            strict=True,
        ):
            lost = lost | (set(entities.entities) & links_lost)
            lost |= {key for key in map(normalise_entity, candidates) if key in gazetteer_lost}
            contexts.append(self._context(pairs, init, entities, facts, lost))
        return contexts

    def _prepare_matcher(
        self, texts_per_query: list[list[str]], init_per_query: list[list[Triplet]]
    ) -> list[set[str]]:
        """Per query, the mention candidates whose labels the KG is asked for (when the matcher resolves
        labels through the KG), all of them prepared in one pass; empty sets otherwise."""
        candidates_per_query: list[set[str]] = [set() for _ in texts_per_query]
        matcher = self.matcher
        if matcher is None or matcher.resolve is None or not self.settings.enabled:
            return candidates_per_query
        for candidates, texts, init in zip(
            candidates_per_query, texts_per_query, init_per_query, strict=True
        ):
            candidates.update(c for text in texts for c in matcher.candidates(text))
            candidates.update(EntitySet.surfaces_of(init))
        matcher.prepare(sorted(set().union(*candidates_per_query)))
        return candidates_per_query

    def _surfaces(self, texts: list[str], init: list[Triplet]) -> list[str]:
        """Ent(C) before linking: τ^init's heads and tails (common words dropped), then the KG labels
        mentioned in C."""
        mentions: list[str] = []
        if self.matcher is not None and self.settings.enabled:
            mentions = [m for text in texts for m in self.matcher.find(text)]
        surfaces = EntitySet.surfaces_of(init)
        if self.matcher is not None:  # common words would link to same-named Debian packages
            surfaces = [s for s in surfaces if not self.matcher.is_common_word(s)]
        return [*surfaces, *mentions]

    def _context(
        self,
        pairs: Sequence[QAPair],
        init: list[Triplet],
        entities: EntitySet,
        facts: list[tuple[str, KGFact]],
        lost: set[str],
    ) -> EnhancedContext:
        """τ' = the facts with a tail in Ent(C), τ^f = τ' ∪ τ^init, and C ⊕ S under the token budget; a
        fact two sources give appears once, naming both (``kg:local+kg:wikidata``)."""
        one_hop_facts = [
            (source, fact)
            for source, fact in (facts if self.settings.enabled else [])
            if filter_one_hop([fact], entities)
        ]
        sources: dict[tuple[str, str, str], list[str]] = {}
        for source, fact in one_hop_facts:
            triplet = fact_to_triplet(fact, source)
            names = sources.setdefault((triplet.head, triplet.relation, triplet.tail), [])
            if source not in names:
                names.append(source)
        kg_triplets = [Triplet(*fact, "+".join(names)) for fact, names in sources.items()]
        triplets = (
            combine(init, kg_triplets, self.settings.include_extracted) if self.settings.enabled else []
        )
        kept_pairs, sentences = fit_budget(
            pairs, verbalise(triplets), self.settings.token_budget, self.count_tokens
        )
        return EnhancedContext(
            render(kept_pairs, sentences),
            kept_pairs,
            triplets,
            sentences,
            sorted(lost),
            init,
            sourced_facts(one_hop_facts),
        )

    def _facts(
        self, head_ids: list[list[str]], entity_sets: list[EntitySet], links: list[Lookup]
    ) -> tuple[list[list[tuple[str, KGFact]]], list[set[str]]]:
        """Per query: candidate facts for τ' (filtered again by :func:`filter_one_hop`), each with the
        name of the source that gave it, asking each source for the heads it linked; and heads lost."""
        facts: list[list[tuple[str, KGFact]]] = [[] for _ in head_ids]
        lost: list[set[str]] = [set() for _ in head_ids]
        for kg, lookup in zip(self.kgs, links, strict=True):
            own = {i for ids in lookup.found.values() for i in ids}
            heads = [[i for i in ids if i in own] for ids in head_ids]
            found, missed = self._facts_of(kg, heads, entity_sets, lookup)
            for query, (query_facts, query_lost) in enumerate(zip(found, missed, strict=True)):
                facts[query] += [(kg.name, fact) for fact in query_facts]
                lost[query] |= query_lost
        return facts, lost

    def _facts_of(
        self, kg: SparqlKnowledgeGraph, head_ids: list[list[str]], entity_sets: list[EntitySet], links: Lookup
    ) -> tuple[list[list[KGFact]], list[set[str]]]:
        """One source's facts per query (``kg_query``: between the heads and Ent(C)'s ids, or one hop)."""
        if self.settings.kg_query == "between":
            tails = [
                sorted({i for key in entities.entities for i in links.found.get(key, ())})
                for entities in entity_sets
            ]
            requests = [(heads, t) for heads, t in zip(head_ids, tails, strict=True)]
            return kg.facts_between(requests)
        result = kg.one_hop_all(sorted({i for ids in head_ids for i in ids}))
        facts = [[f for i in ids for f in result.found.get(i, [])] for ids in head_ids]
        return facts, [set(ids) & result.lost for ids in head_ids]


def _initial_triplets(texts: list[str], extracted: dict[str, list[Triplet]]) -> list[Triplet]:
    """τ^init of one query: the triplets extracted from each of its pair ``texts``, tagged with the pair's
    rank."""
    return [
        dataclasses.replace(t, source=f"{t.source}@pair={rank}")
        for rank, text in enumerate(texts)
        for t in extracted.get(text, [])
    ]


def build_enhancer(
    settings: KnowledgeSettings, count_tokens: TokenCounter, generation_model: GenerationModel | None = None
) -> Enhancer:
    """The :class:`Enhancer` for ``settings`` (loads models, builds or opens the KG store); the LLM extractor
    uses ``generation_model`` when ``knowledge.llm_model`` is ``""``."""
    return Enhancer.from_settings(settings, count_tokens, generation_model)
