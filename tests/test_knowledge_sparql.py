"""SPARQL building and the Wikidata client: hostile strings, real-format JSON results, retries, cache."""

from __future__ import annotations

import json

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
from graphctx.knowledge.wikidata import SparqlClient, SparqlError

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


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_strings_stay_one_literal(hostile: str) -> None:
    store = pyoxigraph.Store()
    node = pyoxigraph.NamedNode("http://example.org/x")
    label = pyoxigraph.NamedNode("http://www.w3.org/2000/01/rdf-schema#label")
    store.add(pyoxigraph.Quad(node, label, pyoxigraph.Literal(hostile, language="en")))
    store.add(pyoxigraph.Quad(node, label, pyoxigraph.Literal("decoy", language="en")))
    rows = [s["surface"].value for s in store.query(label_query([hostile, "absent"], "en"))]
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
        parse_json_results(b'{"head": {"vars": ["item"]}, "results": {"bindi')
    with pytest.raises(ValueError, match=r"an HTML page \(rate limited\)"):
        parse_json_results(b"<html><head><title>Rate limited</title></head></html>")


def test_client_gives_up_with_a_clear_error() -> None:
    """(Retries, splits, HTTP errors and bad bodies against a real server: tests/test_knowledge_live.py.)"""
    unreachable = SparqlClient(
        "http://127.0.0.1:9/sparql", retries=1, backoff_s=0.0, min_interval_s=0.0, timeout_s=1
    )
    with pytest.raises(SparqlError, match="unreachable after 2 tries"):
        unreachable.select("SELECT * WHERE { ?s ?p ?o } LIMIT 1")
    with pytest.raises(ValueError, match="sparql_endpoint"):
        SparqlClient("file:///etc/passwd")


def test_kg_cache_write_waits_for_another_process_holding_the_file(tmp_path) -> None:
    """Ranks of one evaluation share the cache file: a write waits out another process's transaction
    (longer than SQLite's default 5 s busy timeout) instead of failing with "database is locked"."""
    import subprocess
    import sys
    import time

    from graphctx.knowledge.kgcache import KGCache

    path = tmp_path / "kg.sqlite"
    ours = KGCache(path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "db.execute('BEGIN IMMEDIATE')\n"
            "db.execute(\"INSERT INTO lookups VALUES ('label', 'docker', '[\\\"Q15206305\\\"]')\")\n"
            "print('locked', flush=True)\n"
            "time.sleep(6)\n"
            "db.execute('COMMIT')\n",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        started = time.monotonic()
        ours.put_lookups("label", {"nginx": ["Q306144"]})
        assert time.monotonic() - started > 3  # it did wait for the other transaction
    finally:
        holder.wait(timeout=30)
        holder.stdout.close()
    assert holder.returncode == 0
    assert ours.lookups("label", ["docker", "nginx"]) == {"docker": ["Q15206305"], "nginx": ["Q306144"]}
    ours.close()
