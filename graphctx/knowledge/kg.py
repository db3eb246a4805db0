"""Knowledge-graph backends behind one interface: surfaces in → ids; ids in → labelled one-hop facts.

Both backends run the *same* SPARQL (:mod:`graphctx.knowledge.sparql`) through the same bounded batches
(:mod:`graphctx.knowledge.batches`); they differ only in where a query goes:
:class:`~graphctx.knowledge.store.LocalKnowledgeGraph` asks an embedded pyoxigraph store,
:class:`~graphctx.knowledge.wikidata.WikidataKnowledgeGraph` a live endpoint over HTTP (with a persistent
per-entity cache, :mod:`graphctx.knowledge.kgcache`).

Every lookup returns what it found *and* what it lost (entities whose requests kept failing): nothing is
dropped silently.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from graphctx.knowledge.batches import RequestStats, chunks, halves, run_batches
from graphctx.knowledge.entities import normalise_entity
from graphctx.knowledge.kgcache import KGCache
from graphctx.knowledge.sparql import (
    PACKAGE_PREFIX,
    KGFact,
    SparqlError,
    between_query,
    facts_from_rows,
    gazetteer_query,
    label_query,
    one_hop_query,
)

MAX_IDS_PER_SURFACE = 5
"""Most KG nodes one surface may link to (e.g. 'nginx' the software and 'nginx' the Debian package)."""

ONE_HOP_ITEMS_PER_REQUEST = 16
"""Items per unrestricted one-hop request (each sub-select returns up to ``max_facts_per_entity`` rows)."""


class SparqlResponseError(SparqlError):
    """A response that parsed as SPARQL results but lacks the variables the request asked for."""


def surface_variants(surface: str) -> list[str]:
    """Exact-match candidates for a label lookup: as written, normalised, and capitalised."""
    key = normalise_entity(surface)
    return list(dict.fromkeys(v for v in (surface.strip(), key, key[:1].upper() + key[1:]) if v))


def _fact_order(fact: KGFact) -> tuple[str, ...]:
    return (fact.head_label, fact.relation_label, fact.tail_label, fact.tail_id)


@dataclass
class Lookup:
    """Answers per key and the keys lost (their requests failed even alone; retried on the next run)."""

    found: dict[str, Any] = field(default_factory=dict)
    lost: set[str] = field(default_factory=set)


class SparqlKnowledgeGraph(ABC):
    """Linking and one-hop retrieval over any SPARQL source that answers :meth:`select`.

    ``batch_values``: most entities (VALUES terms) per request; ``parallel``: requests in flight;
    ``max_failure_share``: share of failed requests that stops the run; ``cache``: persistent answers.
    """

    name: str

    def __init__(
        self,
        language: str = "en",
        max_facts_per_entity: int = 200,
        *,
        batch_values: int = 400,
        parallel: int = 1,
        max_failure_share: float = 0.5,
        cache: KGCache | None = None,
    ) -> None:
        self.language = language
        self.max_facts_per_entity = max_facts_per_entity
        self.batch_values = batch_values
        self.parallel = parallel
        self.max_failure_share = max_failure_share
        self.cache = cache
        self.stats = RequestStats()

    @property
    def source(self) -> str:
        """Where queries go, for messages."""
        return self.name

    @abstractmethod
    def select(self, query: str) -> list[dict[str, str]]:
        """Rows ``{variable: value}`` of a SELECT query."""

    # ---- batched requests ----------------------------------------------------------------------------
    def _run(
        self,
        batches: Sequence[Any],
        query_of: Callable[[Any], str],
        parse: Callable[[Any, list[dict[str, str]]], Any],
        split: Callable[[Any], list[Any]],
        describe: Callable[[Any], str],
        on_done: Callable[[Any, Any], None],
    ) -> list[Any]:
        """Send ``batches`` (see :func:`run_batches`); returns the lost ones."""

        def send(batch: Any) -> Any:
            rows = self.select(query_of(batch))
            try:
                return parse(batch, rows)
            except (KeyError, ValueError) as error:
                self.stats.add("malformed_responses")
                raise SparqlResponseError(
                    f"{self.source}: {describe(batch)}: malformed response (no {error})"
                ) from error

        outcome = run_batches(
            batches,
            send,
            split,
            parallel=self.parallel,
            stats=self.stats,
            max_failure_share=self.max_failure_share,
            source=self.source,
            failure_types=(SparqlError,),
            on_done=on_done,
        )
        return [batch for batch, _ in outcome.lost]

    def lookup(self, shape: str, surfaces: Iterable[str]) -> Lookup:
        """Per surface: ``label`` → sorted ids whose label or alias it is; ``gazetteer`` → sorted
        ``[item, label, is_package]`` of nameable items (see :func:`gazetteer_query`)."""
        result = Lookup()
        surfaces = list(dict.fromkeys(surfaces))
        if self.cache is not None:
            result.found.update(self.cache.lookups(shape, surfaces))
            self.stats.add("cache_hits", len(result.found))
        todo = [s for s in surfaces if s not in result.found]

        def query_of(batch: list[str]) -> str:
            if shape == "label":
                return label_query(batch, self.language)
            return gazetteer_query(batch, self.language, PACKAGE_PREFIX)

        def parse(batch: list[str], rows: list[dict[str, str]]) -> dict[str, list]:
            found: dict[str, set] = {s: set() for s in batch}
            for row in rows:
                answer = (
                    row["item"] if shape == "label" else (row["item"], row["label"], row["package"] == "true")
                )
                found.setdefault(row["surface"], set()).add(answer)
            return {s: sorted(found[s]) for s in batch}

        def on_done(batch: list[str], answers: dict[str, list]) -> None:
            result.found.update(answers)
            if self.cache is not None:
                self.cache.put_lookups(shape, answers)

        lost = self._run(
            chunks(todo, self.batch_values),
            query_of,
            parse,
            halves,
            lambda b: f"{shape} lookup of {len(b)} surfaces from {b[0]!r}",
            on_done,
        )
        result.lost = {s for batch in lost for s in batch}
        self.stats.add("lost_entities", len(result.lost))
        return result

    # ---- linking -------------------------------------------------------------------------------------
    def link_all(self, surfaces: Iterable[str]) -> Lookup:
        """Normalised surface → every KG id (sorted) whose label or alias equals one of its variants."""
        variant_owner: dict[str, set[str]] = defaultdict(set)
        for surface in surfaces:
            key = normalise_entity(surface)
            if key:
                for variant in surface_variants(surface):
                    variant_owner[variant].add(key)
        answers = self.lookup("label", variant_owner)
        links: dict[str, set[str]] = defaultdict(set)
        for variant, ids in answers.found.items():
            for key in variant_owner[variant]:
                links[key].update(ids)
        lost = {key for variant in answers.lost for key in variant_owner[variant]}
        return Lookup({key: sorted(ids) for key, ids in links.items() if ids}, lost)

    def link(self, surfaces: Iterable[str]) -> dict[str, list[str]]:
        """Normalised surface → sorted KG ids (at most :data:`MAX_IDS_PER_SURFACE`); raises if any is lost."""
        result = self.link_all(surfaces)
        _raise_if_lost(self.source, "link", result.lost)
        return {key: ids[:MAX_IDS_PER_SURFACE] for key, ids in result.found.items()}

    # ---- facts ---------------------------------------------------------------------------------------
    def facts_between(
        self, requests: Sequence[tuple[Sequence[str], Sequence[str]]]
    ) -> tuple[list[list[KGFact]], list[set[str]]]:
        """Per request (heads, tails): the labelled edges from a head to a tail, and the heads lost.

        Requests are batched together into VALUES blocks of at most ``batch_values`` heads + tails (a
        batch asks for the edges between the union of its heads and the union of its tails); pairs already
        asked for (in the cache) are not asked again.
        """
        heads = sorted({h for hs, _ in requests for h in hs})
        checked = self.cache.checked_tails(heads) if self.cache is not None else {}
        known: dict[str, set[KGFact]] = defaultdict(set)
        if self.cache is not None:
            for fact in self.cache.edges("between", heads):
                known[fact.head_id].add(fact)
        missing_per_request = [{h: set(tails) - checked.get(h, set()) for h in hs} for hs, tails in requests]
        missing_heads = {h for missing in missing_per_request for h, tails in missing.items() if tails}
        self.stats.add("cache_hits", len(set(heads) - missing_heads) if self.cache is not None else 0)
        asked: dict[str, set[str]] = defaultdict(set)

        def parse(batch: tuple[list[str], list[str]], rows: list[dict[str, str]]) -> list[KGFact]:
            return facts_from_rows(rows)

        def on_done(batch: tuple[list[str], list[str]], facts: list[KGFact]) -> None:
            batch_heads, batch_tails = batch
            for head in batch_heads:
                asked[head].update(batch_tails)
            for fact in facts:
                known[fact.head_id].add(fact)
            if self.cache is not None:
                self.cache.put_between(batch_heads, batch_tails, facts)

        self._run(
            self._between_batches(missing_per_request),
            lambda b: between_query(b[0], b[1], self.language),
            parse,
            _split_pair,
            lambda b: f"edges between {len(b[0])} heads from {b[0][0]} and {len(b[1])} tails",
            on_done,
        )
        facts_per_request, lost_per_request = [], []
        for (hs, tails), missing in zip(requests, missing_per_request, strict=True):
            tail_set = set(tails)
            facts = {f for h in hs for f in known.get(h, ()) if f.tail_id in tail_set}
            facts_per_request.append(sorted(facts, key=_fact_order))
            lost_per_request.append({h for h, m in missing.items() if m - asked.get(h, set())})
        self.stats.add("lost_entities", len(set().union(*lost_per_request)) if lost_per_request else 0)
        return facts_per_request, lost_per_request

    def _between_batches(self, missing_per_request: list[dict[str, set[str]]]) -> list[tuple[list, list]]:
        """Pack the missing (head → tails) of consecutive requests into batches of bounded size."""
        batches: list[tuple[list, list]] = []
        heads: set[str] = set()
        tails: set[str] = set()
        for missing in missing_per_request:
            q_heads = {h for h, t in missing.items() if t}
            q_tails = {t for h in q_heads for t in missing[h]}
            if not q_heads:
                continue
            if len(q_heads) + len(q_tails) > self.batch_values:  # alone too big: a grid of pieces
                head_size = min(len(q_heads), max(1, self.batch_values // 2))
                tail_size = max(1, self.batch_values - head_size)
                for head_part in chunks(sorted(q_heads), head_size):
                    for tail_part in chunks(sorted(q_tails), tail_size):
                        batches.append((head_part, tail_part))
                continue
            if len(heads | q_heads) + len(tails | q_tails) > self.batch_values:
                batches.append((sorted(heads), sorted(tails)))
                heads, tails = set(), set()
            heads |= q_heads
            tails |= q_tails
        if heads:
            batches.append((sorted(heads), sorted(tails)))
        return batches

    def one_hop_all(self, ids: Sequence[str]) -> Lookup:
        """Every labelled edge leaving each of ``ids``, at most ``max_facts_per_entity`` per entity:
        ``found`` maps id → its facts."""
        ids = sorted(set(ids))
        cap = self.max_facts_per_entity
        result = Lookup({i: [] for i in ids})
        done = self.cache.one_hop_done(ids, cap) if self.cache is not None else set()
        if done:
            self.stats.add("cache_hits", len(done))
            for fact in self.cache.edges(f"one_hop:{cap}", sorted(done)):  # type: ignore[union-attr]
                result.found[fact.head_id].append(fact)

        def on_done(batch: list[str], facts: list[KGFact]) -> None:
            for fact in facts:
                result.found.setdefault(fact.head_id, []).append(fact)
            if self.cache is not None:
                self.cache.put_one_hop(batch, cap, facts)

        lost = self._run(
            chunks([i for i in ids if i not in done], ONE_HOP_ITEMS_PER_REQUEST),
            lambda b: one_hop_query(b, self.language, cap),
            lambda b, rows: facts_from_rows(rows),
            halves,
            lambda b: f"one hop of {len(b)} items from {b[0]}",
            on_done,
        )
        result.lost = {i for batch in lost for i in batch}
        self.stats.add("lost_entities", len(result.lost))
        return result

    def one_hop(self, ids: Sequence[str]) -> list[KGFact]:
        """Every labelled edge leaving ``ids`` (capped per entity), in a deterministic order; raises if an
        entity is lost."""
        if not ids:
            return []
        result = self.one_hop_all(ids)
        _raise_if_lost(self.source, "one hop", result.lost)
        return sorted({f for facts in result.found.values() for f in facts}, key=_fact_order)


def _split_pair(batch: tuple[list[str], list[str]]) -> list[tuple[list[str], list[str]]]:
    """Halve the heads, else the tails (one piece when both hold a single entity)."""
    heads, tails = batch
    if len(heads) > 1:
        return [(part, tails) for part in halves(heads)]
    return [(heads, part) for part in halves(tails)]


def _raise_if_lost(source: str, what: str, lost: set[str]) -> None:
    if lost:
        shown = ", ".join(sorted(lost)[:5])
        raise SparqlError(f"{source}: {what}: {len(lost)} entities could not be fetched ({shown})")


class Gazetteer:
    """Mention-linking labels ``maps = {"software": {key: label}, "package": {key: label}}``.

    Complete from the start (the local store's), or, with ``kg``, read from the backend itself (no local
    files): :meth:`resolve` then looks surfaces up in bounded batches and fills ``maps``. A key's label is
    that of the nameable item with the smallest IRI among those matching it (a package is an item under
    :data:`~graphctx.knowledge.sparql.PACKAGE_PREFIX`). On the local store's triples this is the local
    gazetteer, except where the SQL dump gives one Wikidata id two names (Windows Desktop / Windows, Rex /
    Perl, and two more): the RDF keeps the first as the label, so a prose mention written as the second
    name, if it is also an English word ("Windows"), is not matched.
    """

    def __init__(
        self, maps: dict[str, dict[str, str]] | None = None, kg: SparqlKnowledgeGraph | None = None
    ) -> None:
        self.maps = maps if maps is not None else {"software": {}, "package": {}}
        self.kg = kg
        self.resolved: set[str] = set()
        self.lost: set[str] = set()
        """Keys whose lookups failed."""

    def resolve(self, surfaces: Iterable[str]) -> None:
        """Look up every surface whose key is not resolved yet (nothing to do on a complete gazetteer); a
        key lost once is not asked again by this gazetteer (the next run asks)."""
        if self.kg is None:
            return
        owner: dict[str, set[str]] = defaultdict(set)
        for surface in surfaces:
            key = normalise_entity(surface)
            if key and key not in self.resolved and key not in self.lost:
                for variant in surface_variants(surface):
                    owner[variant].add(key)
        if not owner:
            return
        answers = self.kg.lookup("gazetteer", owner)
        lost = {key for variant in answers.lost for key in owner[variant]}
        found: dict[str, set[tuple[str, str, bool]]] = defaultdict(set)
        for variant, rows in answers.found.items():
            for key in owner[variant]:
                found[key].update((item, label, package) for item, label, package in rows)
        for key in {k for keys in owner.values() for k in keys} - lost:
            self.resolved.add(key)
            for kind, is_package in (("software", False), ("package", True)):
                items = sorted((item, label) for item, label, package in found[key] if package == is_package)
                if items:
                    self.maps[kind][key] = items[0][1]
        self.lost |= lost

    def matcher_resolve(self) -> Callable[[Iterable[str]], None] | None:
        """What a :class:`~graphctx.knowledge.mentions.MentionMatcher` calls before matching, if anything."""
        return self.resolve if self.kg is not None else None


class GazetteerUnion(Gazetteer):
    """The gazetteers of several knowledge sources as one: a key's label is that of the first source
    knowing it; :meth:`resolve` asks each source that reads its labels through its KG."""

    def __init__(self, members: Sequence[Gazetteer]) -> None:
        super().__init__()
        self.members = list(members)
        self._merge()

    def _merge(self) -> None:
        """Fill ``maps`` (in place: a matcher holds it) and ``lost`` from the members', first one winning."""
        for kind, labels in self.maps.items():
            for member in reversed(self.members):
                labels.update(member.maps.get(kind, {}))
        self.lost = set().union(*(member.lost for member in self.members))

    def resolve(self, surfaces: Iterable[str]) -> None:
        surfaces = list(surfaces)
        for member in self.members:
            member.resolve(surfaces)
        self._merge()

    def matcher_resolve(self) -> Callable[[Iterable[str]], None] | None:
        return self.resolve if any(m.matcher_resolve() is not None for m in self.members) else None
