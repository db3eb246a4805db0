"""The Wikidata backend at evaluation scale, against a real SPARQL server with faults: bounded batches of
τ' queries (graphctx) vs the single one-hop query with a global LIMIT (the approach before issue 14).

    python benchmarks/enhance_live.py --questions 200

Starts Oxigraph's SPARQL server (the ``oxigraph`` package) on the local store built from
``../shared/data/kg`` and a fault-injecting proxy in front of it (tests/sparql_server.py). Every
``--fault-every``-th request gets a fault, in turn: 429 with ``Retry-After: 1``, 503, a response stalled
past ``--timeout-s``, a dropped connection. In the first run every request looking up the surface ``--poison``
(default ``Cardano``) gets a 503, however often it is retried: graphctx splits it, records the surface as
lost for the questions naming it, and the second run fetches it. A request with more than ``--max-values``
VALUES terms stalls
too, as a query past the public endpoint's 60 s limit would (Oxigraph on the local store answers anything
quickly). Questions: the cardano test split first, then validation, then train when ``--questions`` asks
for more; each gets its two nearest other questions (MiniLM, dense) with accepted answers as context.

Runs, in one process: graphctx with a fresh KG cache; graphctx again on that cache (a second run, without
the poison); the single-query approach (one label query per 100 surfaces, then one one-hop query for every
entity with ``LIMIT entities × 200``, filtered client-side; mention linking from the local gazetteer as it
was) without the poison, then with it (``single_query_with_poison``); and the local backend (the reference
for ``same_facts_as_local``). All use the same extractor, retry settings and fault cycle. Progress goes to
stderr; the last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import spacy
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graphctx.knowledge.budget import QAPair, build_token_counter
from graphctx.knowledge.enhance import EnhancedContext, Enhancer, build_enhancer
from graphctx.knowledge.entities import normalise_entity
from graphctx.knowledge.extractors import build_extractor
from graphctx.knowledge.kg import Gazetteer, Lookup, SparqlKnowledgeGraph, surface_variants
from graphctx.knowledge.mentions import MentionMatcher, english_words
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.sparql import KGFact, facts_from_rows, iri, label_query, string_literal
from graphctx.knowledge.store import build_store, load_gazetteer
from graphctx.knowledge.wikidata import SparqlClient, SparqlError
from tests.sparql_server import FaultyProxy, oxigraph_server, values_terms

FAULT_CYCLE = ("429", "503", "stall", "drop")
LINK_BATCH = 100
"""Surfaces per label query in the single-query approach."""


def log(message: str) -> None:
    print(f"[enhance-live {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def single_one_hop_query(items: Sequence[str], language: str, limit: int) -> str:
    """The one-hop query before issue 14: every edge leaving ``items``, one global ``LIMIT``."""
    lang = string_literal(language)
    return (
        "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
        "PREFIX wikibase: <http://wikiba.se/ontology#>\n"
        "SELECT ?item ?itemLabel ?prop ?propLabel ?value ?valueLabel WHERE {\n"
        f"  VALUES ?item {{ {' '.join(iri(i) for i in items)} }}\n"
        "  ?item ?direct ?value .\n"
        "  ?prop wikibase:directClaim ?direct .\n"
        f"  ?value rdfs:label ?valueLabel . FILTER(LANG(?valueLabel) = {lang})\n"
        f"  OPTIONAL {{ ?prop rdfs:label ?propLabel . FILTER(LANG(?propLabel) = {lang}) }}\n"
        f"  OPTIONAL {{ ?item rdfs:label ?itemLabel . FILTER(LANG(?itemLabel) = {lang}) }}\n"
        f"}}\nLIMIT {int(limit)}\n"
    )


class SingleQueryKG(SparqlKnowledgeGraph):
    """The approach before issue 14 behind the interface the enhancer uses: sequential label queries, then
    one one-hop query for all entities of all questions; a failure aborts (it raises)."""

    name = "kg:wikidata"

    def __init__(self, client: SparqlClient, language: str = "en") -> None:
        super().__init__(language)
        self.client = client
        self.largest_values = 0

    def select(self, query: str) -> list[dict[str, str]]:
        return self.client.select(query)

    def link_all(self, surfaces) -> Lookup:
        owner: dict[str, set[str]] = {}
        for surface in surfaces:
            for variant in surface_variants(surface):
                owner.setdefault(variant, set()).add(normalise_entity(surface))
        links: dict[str, set[str]] = {}
        variants = list(owner)
        for start in range(0, len(variants), LINK_BATCH):
            chunk = variants[start : start + LINK_BATCH]
            self.stats.add("sparql_requests")
            self.largest_values = max(self.largest_values, len(chunk))
            for row in self.select(label_query(chunk, self.language)):
                for key in owner.get(row["surface"], ()):
                    links.setdefault(key, set()).add(row["item"])
        return Lookup({key: sorted(ids) for key, ids in links.items()})

    def facts_between(self, requests):
        heads = sorted({h for hs, _ in requests for h in hs})
        self.stats.add("sparql_requests")
        self.largest_values = max(self.largest_values, len(heads))
        rows = self.select(single_one_hop_query(heads, self.language, len(heads) * 200)) if heads else []
        by_head: dict[str, list[KGFact]] = {}
        order = lambda f: (f.head_label, f.relation_label, f.tail_label, f.tail_id)  # noqa: E731 (as before)
        for fact in sorted(set(facts_from_rows(rows)), key=order):
            by_head.setdefault(fact.head_id, []).append(fact)
        return [[f for h in hs for f in by_head.get(h, [])] for hs, _ in requests], [set() for _ in requests]


def load_questions(count: int, cache: Path) -> tuple[list[str], list[list[QAPair]]]:
    """``count`` cardano questions (test, then validation, then train) with their two nearest others."""
    from graphctx.data import load_qa_dataset
    from graphctx.data.settings import DatasetSettings, SplitSettings
    from graphctx.pipeline.contexts import pairs_for_hits
    from graphctx.pipeline.pool import pool_retriever
    from graphctx.retrieval.settings import RetrievalSettings

    repo = Path(__file__).resolve().parents[1]
    tiny = yaml.safe_load((repo / "configs" / "tiny.yaml").read_text())["data"]["dataset"]
    settings = DatasetSettings(source=str(repo / tiny["source"]), split=SplitSettings(**tiny["split"]))
    settings = dataclasses.replace(settings, filters=dataclasses.replace(settings.filters, max_tokens=None))
    dataset = load_qa_dataset(settings, cache)
    rows = [row for split in ("test", "validation", "train") for row in dataset[split]]
    pool = {int(row["id"]): row for row in rows}
    chosen = rows[:count]
    retrieval = RetrievalSettings(method="dense", top_k=3)
    hits = pool_retriever(rows, retrieval, str(cache)).retrieve([r["question"] for r in chosen])
    pairs = [
        [pair for pair in pairs_for_hits(found, pool) if pair.id != int(row["id"])][:2]
        for row, found in zip(chosen, hits, strict=True)
    ]
    return [r["question"] for r in chosen], pairs


def fault_plan(every: int, max_values: int, poison: str = ""):
    """The faults of one run: a cycle of transient faults, stalls of too-big requests, and (when set) a
    503 for every request that looks up the surface ``poison`` (an outage that outlasts the retries)."""
    poisoned = string_literal(poison, "en") if poison else None

    def plan(number: int, query: str) -> str | None:
        if values_terms(query) > max_values:
            return "stall"
        if poisoned is not None and poisoned in query:
            return "503"
        return FAULT_CYCLE[(number // every - 1) % len(FAULT_CYCLE)] if number % every == 0 else None

    return plan


def kg_triplets(context: EnhancedContext, source: str) -> list[tuple[str, str, str]]:
    """τ' of a context: its KG facts as (head, relation, tail)."""
    return [(t.head, t.relation, t.tail) for t in context.triplets if t.source == source]


def count_entities(enhancer: Enhancer) -> set[str]:
    """Instrument ``enhancer`` to collect the KG ids (heads and tails) its questions ask about."""
    asked: set[str] = set()
    facts_between = enhancer.kg.facts_between

    def recording(requests):
        asked.update(i for heads, tails in requests for i in (*heads, *tails))
        return facts_between(requests)

    enhancer.kg.facts_between = recording  # type: ignore[method-assign]
    return asked


def shape(query: str) -> str:
    """Which kind of request a query is."""
    if "?package" in query:
        return "gazetteer"
    if "VALUES ?surface" in query:
        return "label"
    return "facts"


def figures(
    contexts: list[EnhancedContext], stats: dict[str, int], seconds: float, proxy: FaultyProxy
) -> dict:
    by_shape: dict[str, int] = {}
    for query in proxy.queries:
        by_shape[shape(query)] = by_shape.get(shape(query), 0) + 1
    return {
        "sparql_requests": stats["sparql_requests"],
        "http_requests": len(proxy.log),
        "http_requests_by_shape": by_shape,
        "retried": stats["retried"],
        "split_requests": stats["split_requests"],
        "facts": sum(t.source == "kg:wikidata" for c in contexts for t in c.triplets),
        "kg_lost_entities": sum(len(c.kg_lost_entities) for c in contexts),
        "cache_hits": stats["cache_hits"],
        "malformed_responses": stats["malformed_responses"],
        "faults_injected": sum(1 for _, fault in proxy.log if fault),
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--fault-every", type=int, default=7, help="every k-th request gets a fault")
    parser.add_argument("--max-values", type=int, default=1000, help="larger requests stall (a timeout)")
    parser.add_argument("--poison", default="Cardano", help="surface whose lookups fail in the first run")
    parser.add_argument("--timeout-s", type=float, default=2.0)
    parser.add_argument("--min-interval-s", type=float, default=0.05)
    parser.add_argument("--cache", default="", help="cache folder (default: a temporary one)")
    args = parser.parse_args()

    root = Path(args.cache or tempfile.mkdtemp(prefix="enhance-live-"))
    root.mkdir(parents=True, exist_ok=True)
    kg_dir = Path(__file__).resolve().parents[2] / "shared" / "data" / "kg"
    local = KnowledgeSettings(kg_dir=str(kg_dir), cache_dir=str(root / "local"), token_budget=100_000)
    tokenizer_file = root / "llama.model"
    if not tokenizer_file.exists():
        from graphctx.model.loading import packaged_llama_sentencepiece

        tokenizer_file.write_bytes(Path(packaged_llama_sentencepiece()).read_bytes())
    count_tokens = build_token_counter(str(tokenizer_file))
    log("loading questions and retrieving their pairs")
    queries, pairs = load_questions(args.questions, root / "data")
    store = build_store(local)
    result: dict = {"questions": len(queries)}
    with (
        oxigraph_server(store / "oxigraph") as endpoint,
        FaultyProxy(endpoint, stall_s=args.timeout_s + 1) as proxy,
    ):
        live = dataclasses.replace(
            local,
            backend="wikidata",
            kg_dir=str(root / "no-local-kg"),  # nothing local may be read
            sparql_endpoint=proxy.url,
            sparql_timeout_s=args.timeout_s,
            sparql_min_interval_s=args.min_interval_s,
            cache_dir=str(root / "live"),
        )
        shutil.rmtree(root / "live", ignore_errors=True)  # the first run starts with an empty KG cache
        runs: dict[str, tuple[list[EnhancedContext], dict]] = {}
        for run in ("graphctx", "graphctx_second_run"):
            poison = args.poison if run == "graphctx" else ""
            proxy.reset(fault_plan(args.fault_every, args.max_values, poison))
            enhancer = build_enhancer(live, count_tokens)
            enhancer.cache_dir = None  # contexts are recomputed; the KG cache is what is measured
            asked = count_entities(enhancer)
            log(f"{run}: enhancing {len(queries)} questions")
            started = time.perf_counter()
            contexts = enhancer.enhance_batch(queries, pairs)
            seconds = time.perf_counter() - started
            runs[run] = (contexts, figures(contexts, enhancer.kg.stats.to_json(), seconds, proxy))
            runs[run][1]["entities"] = len(asked)
            log(f"{run}: {runs[run][1]}")
        contexts, first = runs["graphctx"]
        result.update(first)
        second = runs["graphctx_second_run"][1]
        result["cache_hits_second_run"] = second["cache_hits"]
        result["sparql_requests_second_run"] = second["sparql_requests"]
        result["kg_lost_entities_second_run"] = second["kg_lost_entities"]
        result["seconds_second_run"] = second["seconds"]
        for name, poison in (("single_query", ""), ("single_query_with_poison", args.poison)):
            proxy.reset(fault_plan(args.fault_every, args.max_values, poison))
            result[name] = single_query_run(live, local, proxy, count_tokens, queries, pairs, contexts)
    log("local backend: enhancing the same questions (the reference)")
    reference = build_enhancer(local, count_tokens)
    reference.cache_dir = None
    local_asked = count_entities(reference)
    expected = [kg_triplets(c, "kg:local") for c in reference.enhance_batch(queries, pairs)]
    result["same_facts_as_local"] = [kg_triplets(c, "kg:wikidata") for c in contexts] == expected
    result["entities_local"] = len(local_asked)
    result["same_facts_as_single_query"] = result["single_query"].pop("same_facts")
    result["single_query_with_poison"].pop("same_facts")
    print(json.dumps(result), flush=True)


def single_query_run(
    live: KnowledgeSettings,
    local: KnowledgeSettings,
    proxy: FaultyProxy,
    count_tokens,
    queries: list[str],
    pairs: list[list[QAPair]],
    reference: list[EnhancedContext],
) -> dict:
    """The approach before issue 14 on the same questions, behind the same faults."""
    client = SparqlClient(
        proxy.url,
        timeout_s=live.sparql_timeout_s,
        retries=live.sparql_retries,
        min_interval_s=live.sparql_min_interval_s,
        user_agent=live.user_agent,
    )
    kg = SingleQueryKG(client, live.language)
    client.stats = kg.stats
    gazetteer = Gazetteer(load_gazetteer(local))
    extractor = build_extractor(local, None, gazetteer)
    matcher = MentionMatcher(gazetteer.maps, english_words(spacy.load(live.spacy_model)))
    asked = count_entities(enhancer := Enhancer(live, extractor, kg, matcher, count_tokens, None))
    log(f"single query: enhancing {len(queries)} questions")
    started = time.perf_counter()
    error = ""
    contexts: list[EnhancedContext] = []
    try:
        contexts = enhancer.enhance_batch(queries, pairs)
    except SparqlError as failure:
        error = str(failure)[:300]
    found = figures(contexts, kg.stats.to_json(), time.perf_counter() - started, proxy)
    found["entities"] = len(asked)
    found["largest_request_values"] = kg.largest_values
    found["error"] = error
    found["same_facts"] = bool(contexts) and [kg_triplets(c, "kg:wikidata") for c in contexts] == [
        kg_triplets(c, "kg:wikidata") for c in reference
    ]
    log(f"single query: {found}")
    return found


if __name__ == "__main__":
    main()
