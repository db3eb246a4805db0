"""SPARQL building and the Wikidata client: hostile strings, real-format JSON results, retries, cache."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs

import pyoxigraph
import pytest

from graphctx.knowledge.sparql import (
    facts_from_rows,
    iri,
    label_query,
    one_hop_query,
    parse_json_results,
    string_literal,
)
from graphctx.knowledge.verbalise import fact_to_triplet
from graphctx.knowledge.wikidata import SparqlClient, SparqlError, WikidataKnowledgeGraph

HOSTILE = [
    'nginx" } ; DROP ALL ; #',
    "docker'}} UNION { ?s ?p ?o }",
    "multi\nline\r\n} #",
    'back\\slash \\" quote',
    "\\u0022 } #",
    "tab\there { } < > @en",
    '"""triple"""',
]

# What query.wikidata.org returns (application/sparql-results+json) for the one-hop query on Docker.
WDQS_ONE_HOP = {
    "head": {"vars": ["item", "itemLabel", "prop", "propLabel", "value", "valueLabel"]},
    "results": {
        "bindings": [
            {
                "item": {"type": "uri", "value": "http://www.wikidata.org/entity/Q15206305"},
                "itemLabel": {"xml:lang": "en", "type": "literal", "value": "Docker"},
                "prop": {"type": "uri", "value": "http://www.wikidata.org/entity/P306"},
                "propLabel": {"xml:lang": "en", "type": "literal", "value": "operating system"},
                "value": {"type": "uri", "value": "http://www.wikidata.org/entity/Q388"},
                "valueLabel": {"xml:lang": "en", "type": "literal", "value": "Linux"},
            },
            {
                "item": {"type": "uri", "value": "http://www.wikidata.org/entity/Q15206305"},
                "itemLabel": {"xml:lang": "en", "type": "literal", "value": "Docker"},
                "prop": {"type": "uri", "value": "http://www.wikidata.org/entity/P277"},
                "value": {"type": "uri", "value": "http://www.wikidata.org/entity/Q37227"},
                "valueLabel": {"xml:lang": "en", "type": "literal", "value": "Go"},
            },
        ]
    },
}
WDQS_LABELS = {
    "head": {"vars": ["surface", "item"]},
    "results": {
        "bindings": [
            {
                "surface": {"xml:lang": "en", "type": "literal", "value": "Docker"},
                "item": {"type": "uri", "value": "http://www.wikidata.org/entity/Q15206305"},
            }
        ]
    },
}


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_strings_stay_one_literal(hostile: str) -> None:
    store = pyoxigraph.Store()
    node = pyoxigraph.NamedNode("http://example.org/x")
    label = pyoxigraph.NamedNode("http://www.w3.org/2000/01/rdf-schema#label")
    store.add(pyoxigraph.Quad(node, label, pyoxigraph.Literal(hostile, language="en")))
    store.add(pyoxigraph.Quad(node, label, pyoxigraph.Literal("decoy", language="en")))
    rows = [s["surface"].value for s in store.query(label_query([hostile, "absent"], "en", limit=10))]
    assert rows == [hostile]  # parsed as one literal, matched exactly, nothing injected
    echoed = [
        s["x"].value for s in store.query(f"SELECT ?x WHERE {{ VALUES ?x {{ {string_literal(hostile)} }} }}")
    ]
    assert echoed == [hostile]


def test_bad_iris_and_language_tags_are_refused() -> None:
    assert iri("http://www.wikidata.org/entity/Q388") == "<http://www.wikidata.org/entity/Q388>"
    for bad in [
        "http://x.org/a> } DROP ALL #",
        "no-scheme",
        "http://x.org/a b",
        'http://x.org/"q"',
        "http://x/{y}",
    ]:
        with pytest.raises(ValueError):
            iri(bad)
    with pytest.raises(ValueError):
        one_hop_query(["http://x.org/a> . ?s ?p ?o"], "en", 10)
    with pytest.raises(ValueError, match="language"):
        string_literal("x", 'en" } #')


def test_real_format_results_parse_into_readable_facts() -> None:
    facts = facts_from_rows(parse_json_results(json.dumps(WDQS_ONE_HOP)))
    assert [(f.head_label, f.relation_label, f.tail_label) for f in facts] == [
        ("Docker", "operating system", "Linux"),
        ("Docker", "P277", "Go"),  # property label missing: falls back to the id
    ]
    assert [fact_to_triplet(f, "kg:wikidata").relation for f in facts] == ["runs on", "is written in"]
    with pytest.raises(SyntaxError):
        parse_json_results(b"<html>rate limited</html>")


class _Endpoint(http.server.BaseHTTPRequestHandler):
    """A local SPARQL endpoint: fails ``failures`` times with 503, then answers from ``responses``."""

    failures = 0
    requests: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        query = parse_qs(self.rfile.read(length).decode())["query"][0]
        type(self).requests.append(query)
        if type(self).failures > 0:
            type(self).failures -= 1
            self.send_response(503)
            self.send_header("Retry-After", "0")
            self.end_headers()
            return
        assert self.headers["Accept"] == "application/sparql-results+json"
        assert self.headers["User-Agent"].startswith("graphctx")
        body = json.dumps(WDQS_LABELS if "VALUES ?surface" in query else WDQS_ONE_HOP).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/sparql-results+json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Endpoint)
    _Endpoint.requests, _Endpoint.failures = [], 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/sparql"
    server.shutdown()


def test_client_retries_then_caches(endpoint: str, tmp_path: Path) -> None:
    client = SparqlClient(
        endpoint, retries=2, backoff_s=0.0, min_interval_s=0.0, user_agent="graphctx-test", cache_dir=tmp_path
    )
    kg = WikidataKnowledgeGraph(client)
    _Endpoint.failures = 2
    assert kg.link(['Docker"} #']) == {}  # nothing matches the hostile surface
    assert len(_Endpoint.requests) == 3 and 'Docker\\"} #' in _Endpoint.requests[-1]
    links = kg.link(["Docker"])
    assert links == {"docker": ["http://www.wikidata.org/entity/Q15206305"]}
    facts = kg.one_hop(links["docker"])
    assert [(f.head_label, f.tail_label) for f in facts] == [("Docker", "Go"), ("Docker", "Linux")]
    sent = len(_Endpoint.requests)
    assert kg.one_hop(links["docker"]) == facts  # second time from the on-disk cache
    assert len(_Endpoint.requests) == sent and len(list(tmp_path.glob("*.json"))) == 3


def test_client_gives_up_with_a_clear_error(endpoint: str) -> None:
    client = SparqlClient(endpoint, retries=1, backoff_s=0.0, min_interval_s=0.0)
    _Endpoint.failures = 5
    with pytest.raises(SparqlError, match="HTTP 503"):
        client.select("SELECT * WHERE { ?s ?p ?o } LIMIT 1")
    assert len(_Endpoint.requests) == 2
    unreachable = SparqlClient(
        "http://127.0.0.1:9/sparql", retries=1, backoff_s=0.0, min_interval_s=0.0, timeout_s=1
    )
    with pytest.raises(SparqlError, match="unreachable after 2 tries"):
        unreachable.select("SELECT * WHERE { ?s ?p ?o } LIMIT 1")
    with pytest.raises(ValueError, match="sparql_endpoint"):
        SparqlClient("file:///etc/passwd")
