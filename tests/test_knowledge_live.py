"""The Wikidata backend over HTTP against a real SPARQL server (Oxigraph's, on the local store's triples),
behind a fault-injecting proxy: same facts as the local backend, retries, splits, loss accounting, cache."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphctx.data.html import html_to_text
from graphctx.errors import KnowledgeGraphUnavailable
from graphctx.knowledge.budget import QAPair, build_token_counter
from graphctx.knowledge.enhance import EnhancedContext, Enhancer, build_enhancer
from graphctx.knowledge.entities import normalise_entity
from graphctx.knowledge.kg import Gazetteer
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.sparql import SparqlError
from graphctx.knowledge.store import DEBIAN, WD, LocalKnowledgeGraph, build_store
from graphctx.knowledge.wikidata import SparqlClient, WikidataKnowledgeGraph
from tests.sparql_server import FaultyProxy, first_requests, oxigraph_server, values_terms

DOCKER, LINUX = WD + "Q15206305", WD + "Q388"
QUESTIONS = 12
"""Real cardano questions enhanced in the comparison (two retrieved pairs each)."""


@pytest.fixture(scope="module")
def endpoint(kg_settings: KnowledgeSettings) -> Iterator[str]:
    """Oxigraph's SPARQL server on the very store the local backend reads (the same triples)."""
    with oxigraph_server(build_store(kg_settings) / "oxigraph") as url:
        yield url


@pytest.fixture
def proxy(endpoint: str) -> Iterator[FaultyProxy]:
    with FaultyProxy(endpoint, stall_s=1.5) as faulty:
        yield faulty


def live_settings(url: str, cache_dir: Path, **changes: object) -> KnowledgeSettings:
    """The wikidata backend on ``url``; ``kg_dir`` points nowhere, so reading local KG files would fail."""
    base = KnowledgeSettings(
        backend="wikidata",
        kg_dir=str(cache_dir / "no-local-kg"),
        sparql_endpoint=url,
        sparql_timeout_s=1.0,
        sparql_retries=2,
        sparql_min_interval_s=0.0,
        cache_dir=str(cache_dir),
        token_budget=100_000,
    )
    return dataclasses.replace(base, **changes)


def live_kg(url: str, cache_dir: Path, **changes: object) -> WikidataKnowledgeGraph:
    kg = WikidataKnowledgeGraph.from_settings(live_settings(url, cache_dir, **changes))
    kg.client.backoff_s = 0.05
    return kg


def live_enhancer(url: str, cache_dir: Path, tokenizer, **changes: object) -> Enhancer:
    enhancer = build_enhancer(live_settings(url, cache_dir, **changes), build_token_counter(tokenizer))
    enhancer.kg.client.backoff_s = 0.05
    return enhancer


@pytest.fixture(scope="module")
def questions(cardano_dir: Path) -> tuple[list[str], list[list[QAPair]]]:
    """Real cardano questions naming software the KG knows, each with the next two such
    question/accepted-answer pairs as its context."""
    rows = {r.get("Id"): r.attrib for r in ET.parse(cardano_dir / "Posts.xml").getroot()}
    pairs = []
    for post in rows.values():
        answer = rows.get(post.get("AcceptedAnswerId", ""))
        if post.get("PostTypeId") == "1" and answer is not None:
            question = f"{post['Title']}\n\n{html_to_text(post['Body'])}"
            pairs.append(QAPair(question, html_to_text(answer["Body"]), int(post["Id"])))
    software = re.compile(r"\b(docker|ubuntu|linux|nginx|cabal|ghc|haskell|python|postgres)\b", re.IGNORECASE)
    pairs = [p for p in pairs if len(software.findall(f"{p.question} {p.answer}")) >= 3][: QUESTIONS * 3]
    return [p.question for p in pairs[::3]], [
        [pairs[i + 1], pairs[i + 2]] for i in range(0, QUESTIONS * 3, 3)
    ]


def comparable(context: EnhancedContext) -> tuple:
    return (
        context.text,
        [
            dataclasses.replace(t, source=t.source.replace("kg:wikidata", "kg:local"))
            for t in context.triplets
        ],
    )


@pytest.mark.slow
def test_live_backend_gives_the_local_facts_through_faults(
    kg_settings, proxy: FaultyProxy, questions, llama_tokenizer, tmp_path: Path
) -> None:
    queries, pairs = questions
    local = build_enhancer(kg_settings, build_token_counter(llama_tokenizer)).enhance_batch(queries, pairs)
    proxy.inject = first_requests("429", "503", "stall", "drop")
    enhancer = live_enhancer(proxy.url, tmp_path, llama_tokenizer, sparql_batch_values=60)
    live = enhancer.enhance_batch(queries, pairs)
    assert [comparable(c) for c in live] == [comparable(c) for c in local]
    kg_facts = sum(t.source == "kg:wikidata" for c in live for t in c.triplets)
    assert kg_facts >= 5 and all(not c.kg_lost_entities for c in live)
    stats = enhancer.kg.stats
    assert proxy.faults() == {"429": 1, "503": 1, "stall": 1, "drop": 1} | dict.fromkeys(
        ("html", "garbage", "wrongvars"), 0
    )
    assert stats.retried == 4 and stats.lost_entities == 0 and stats.sparql_requests > 5
    assert max(values_terms(q) for q in proxy.queries) <= 60  # bounded VALUES blocks, several in flight
    # the stalled request still runs on the server while its retry is sent (the endpoint's view, as on WDQS)
    assert 1 < proxy.max_in_flight <= enhancer.settings.sparql_parallel + proxy.faults()["stall"]
    assert proxy.user_agents == {enhancer.settings.user_agent}
    # a second run (a new process: fresh enhancer, same cache folder) answers from the per-entity cache
    again = live_enhancer(proxy.url, tmp_path, llama_tokenizer, sparql_batch_values=60)
    again.cache_dir = None  # no cached contexts: the knowledge stage runs again
    sent = len(proxy.log)
    assert [comparable(c) for c in again.enhance_batch(queries, pairs)] == [comparable(c) for c in local]
    assert len(proxy.log) == sent and again.kg.stats.sparql_requests == 0 and again.kg.stats.cache_hits > 50


def test_failed_requests_are_split_and_lost_entities_recorded(
    proxy: FaultyProxy, tmp_path: Path, kg_settings
) -> None:
    requests = [([DOCKER, DEBIAN + "nginx"], [LINUX, DEBIAN + "libssl3", DEBIAN + "iproute2"])]
    local = LocalKnowledgeGraph.from_settings(kg_settings).facts_between(requests)[0]
    # a batch naming Docker and more than two entities in all stalls past the timeout, as a too-big
    # query would (the query's PREFIX lines hold three more IRIs)
    proxy.inject = lambda n, q: "stall" if DOCKER in q and q.count("<http") - 3 > 2 else None
    kg = live_kg(proxy.url, tmp_path, sparql_retries=0, sparql_timeout_s=0.5)
    facts, lost = kg.facts_between(requests)
    assert facts == local and lost == [set()]
    assert kg.stats.split_requests >= 2 and kg.stats.lost_entities == 0
    # a request naming Docker always fails: Docker is lost (recorded), nginx's facts still arrive
    proxy.inject = lambda n, q: "503" if DOCKER in q else None
    other = live_kg(proxy.url, tmp_path / "other", sparql_retries=1)
    facts, lost = other.facts_between(requests)
    assert lost == [{DOCKER}] and other.stats.lost_entities == 1
    assert facts[0] and all(f.head_id == DEBIAN + "nginx" for f in facts[0])
    # the next run (endpoint healthy) asks only for what was lost, and gets it
    proxy.inject = lambda n, q: None
    sent = len(proxy.log)
    rerun = live_kg(proxy.url, tmp_path / "other")
    facts, lost = rerun.facts_between(requests)
    assert facts == local and lost == [set()]
    assert len(proxy.log) == sent + 1 and rerun.stats.cache_hits == 1  # nginx came from the cache
    assert DOCKER in proxy.queries[-1] and f"<{DEBIAN}nginx>" not in proxy.queries[-1]


def test_lost_entities_reach_the_context_and_are_not_cached(
    proxy: FaultyProxy, questions, llama_tokenizer, tmp_path: Path
) -> None:
    queries, pairs = questions
    poison = "Cardano"  # a label lookup variant that always fails
    proxy.inject = lambda n, q: "503" if f'"{poison}"@en' in q else None
    enhancer = live_enhancer(proxy.url, tmp_path, llama_tokenizer, sparql_retries=0)
    contexts = enhancer.enhance_batch(queries[:4], pairs[:4])
    assert any("cardano" in c.kg_lost_entities for c in contexts)
    assert enhancer.kg.stats.lost_entities >= 1
    cached = list((tmp_path / "enhanced").glob("*.json"))
    assert len(cached) == sum(not c.kg_lost_entities for c in contexts)
    proxy.inject = lambda n, q: None
    rerun = live_enhancer(proxy.url, tmp_path, llama_tokenizer).enhance_batch(queries[:4], pairs[:4])
    assert all(not c.kg_lost_entities for c in rerun)


def test_whole_endpoint_failing_stops_with_a_clear_error(proxy: FaultyProxy, tmp_path: Path) -> None:
    proxy.inject = lambda n, q: "503"
    kg = live_kg(proxy.url, tmp_path, sparql_retries=0, sparql_max_failure_share=0.5)
    with pytest.raises(
        KnowledgeGraphUnavailable, match=r"sparql_max_failure_share=0.5; last error: .*HTTP 503"
    ):
        kg.link_all([f"software {i}" for i in range(50)])
    proxy.inject = lambda n, q: "html"  # a maintenance page with HTTP 200
    kg = live_kg(proxy.url, tmp_path, sparql_retries=0)
    with pytest.raises(KnowledgeGraphUnavailable, match=r"HTML page \(wikimedia error\)"):
        kg.link_all([f"software {i}" for i in range(50)])
    assert kg.stats.malformed_responses >= 4


def test_malformed_response_names_the_request_and_is_counted(
    proxy: FaultyProxy, tmp_path: Path, kg_settings: KnowledgeSettings
) -> None:
    local_kg = LocalKnowledgeGraph.from_settings(kg_settings)
    proxy.inject = first_requests("garbage")
    client = SparqlClient(proxy.url, retries=0, min_interval_s=0.0)
    with pytest.raises(SparqlError, match=r"request 1: response is not SPARQL JSON results"):
        client.select("SELECT ?item WHERE { ?item ?p ?o } LIMIT 1")
    assert client.stats.malformed_responses == 1
    assert client.select("SELECT ?item WHERE { ?item ?p ?o } LIMIT 1")  # the next one is fine
    proxy.inject = first_requests("garbage")  # inside a batch: counted, split, then answered
    kg = live_kg(proxy.url, tmp_path)
    assert kg.link(["Docker", "Linux"]) == local_kg.link(["Docker", "Linux"])
    assert kg.stats.malformed_responses == 1 and kg.stats.split_requests == 1
    proxy.inject = lambda n, q: "wrongvars"  # SPARQL results, but not the variables asked for
    kg = live_kg(proxy.url, tmp_path / "again", sparql_retries=0)
    with pytest.raises(KnowledgeGraphUnavailable, match=r"label lookup of \d+ surfaces from '.*': malformed"):
        kg.link_all([f"software {i}" for i in range(50)])
    assert kg.stats.malformed_responses >= 4


def test_gazetteer_through_the_endpoint_matches_the_local_one(
    kg_settings: KnowledgeSettings, endpoint: str, tmp_path: Path
) -> None:
    from graphctx.knowledge.store import load_gazetteer

    local = load_gazetteer(kg_settings)
    surfaces = ["Docker", "nginx", "postgres", "cabal-install", "operating system", "instance of", "admin"]
    surfaces += ['nginx" } ; DROP ALL ; #', "multi\nline\r\n} #"]  # hostile: each one escaped literal
    gazetteer = Gazetteer(kg=live_kg(endpoint, tmp_path))
    gazetteer.resolve(surfaces)
    keys = {normalise_entity(s) for s in surfaces}
    for kind in ("software", "package"):
        assert gazetteer.maps[kind] == {k: local[kind][k] for k in keys if k in local[kind]}
    assert gazetteer.maps["software"]["postgres"] == "PostgreSQL" and "nginx" in gazetteer.maps["package"]
    assert not gazetteer.lost and gazetteer.resolved == keys


def test_one_hop_cap_is_per_entity(kg_settings: KnowledgeSettings, endpoint: str, tmp_path: Path) -> None:
    """``kg_query: one_hop`` keeps at most ``max_facts_per_entity`` per entity: a popular one (libc6 has
    thousands of reverse edges but few forward ones; Debian's nginx many) cannot crowd out a small one."""
    kg = live_kg(endpoint, tmp_path, kg_query="one_hop", max_facts_per_entity=2)
    found = kg.one_hop_all([DEBIAN + "nginx", DOCKER, LINUX]).found
    local = LocalKnowledgeGraph.from_settings(kg_settings)
    for item in (DEBIAN + "nginx", DOCKER):
        everything = local.select(
            f"SELECT ?v WHERE {{ <{item}> ?d ?v . ?p <http://wikiba.se/ontology#directClaim> ?d }}"
        )
        assert len(everything) > 2 and len(found[item]) == 2
