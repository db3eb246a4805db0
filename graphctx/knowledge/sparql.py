"""The SPARQL that both knowledge-graph backends run, built without string interpolation of raw text.

User text reaches a query only as a SPARQL string literal made by :func:`string_literal` (every quote,
backslash and line break escaped, codepoint escapes neutralised) and IRIs only after :func:`iri` checked
them against the IRI grammar, so text like ``"} ; DROP ALL #`` stays a harmless string.

The queries follow Wikidata's RDF model, which the local store reproduces:

* label lookup: ``?item rdfs:label|skos:altLabel "surface"@en`` (and, for mention linking, the nameable
  items with their labels: :func:`gazetteer_query`);
* edges: ``?item ?direct ?value . ?prop wikibase:directClaim ?direct`` with English labels of the
  property and the value (values without a label, i.e. literals, are not entities and are skipped), either
  between given heads and tails (:func:`between_query`, τ') or every edge of each item up to a per-item
  limit (:func:`one_hop_query`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyoxigraph

from graphctx.errors import EndpointError

PREFIXES = (
    "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
    "PREFIX skos: <http://www.w3.org/2004/02/skos/core#>\n"
    "PREFIX wikibase: <http://wikiba.se/ontology#>\n"
)
PACKAGE_PREFIX = "https://packages.debian.org/"
"""IRIs of Debian packages in the local store: nameable in text without being an instance of anything."""
_LANGUAGE = re.compile(r"^[A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*$")
# IRIREF in SPARQL 1.1: no controls, space, <>"{}|^`\ ; we also require a scheme.
_IRI = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:[^\x00-\x20<>"{}|^`\\]*$')
_ECHAR = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def string_literal(value: str, language: str | None = None) -> str:
    """``value`` as a double-quoted SPARQL literal, optionally language-tagged.

    Quotes, backslashes and line breaks become ECHAR escapes (a backslash is doubled, so input such as
    ``\\u0022`` stays six characters and never becomes a quote); other control characters, which a
    parser may reject, are dropped.
    """
    if language is not None and not _LANGUAGE.match(language):
        raise ValueError(f"knowledge.language: {language!r} is not a valid language tag")
    body = "".join(_ECHAR.get(ch, "" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch) for ch in value)
    return f'"{body}"' + (f"@{language}" if language else "")


def iri(value: str) -> str:
    """``<value>`` after checking that it is an absolute IRI with no character that could end it."""
    if not _IRI.match(value):
        raise ValueError(f"not a safe absolute IRI: {value!r}")
    return f"<{value}>"


def label_query(surfaces: Iterable[str], language: str) -> str:
    """Items whose label or alias equals one of ``surfaces`` (exact, language-tagged)."""
    values = " ".join(string_literal(s, language) for s in dict.fromkeys(surfaces))
    return (
        f"{PREFIXES}SELECT DISTINCT ?surface ?item WHERE {{\n"
        f"  VALUES ?surface {{ {values} }}\n"
        "  ?item rdfs:label|skos:altLabel ?surface .\n"
        "}\n"
    )


def _edge_patterns(lang: str) -> str:
    """An edge ``?item → ?value`` through a direct-claim predicate, to a value labelled in ``lang``."""
    return (
        "  ?item ?direct ?value .\n"
        "  ?prop wikibase:directClaim ?direct .\n"
        f"  ?value rdfs:label ?valueLabel . FILTER(LANG(?valueLabel) = {lang})\n"
    )


def _edge_labels(lang: str) -> str:
    """The optional English labels of the property and of the head."""
    return (
        f"  OPTIONAL {{ ?prop rdfs:label ?propLabel . FILTER(LANG(?propLabel) = {lang}) }}\n"
        f"  OPTIONAL {{ ?item rdfs:label ?itemLabel . FILTER(LANG(?itemLabel) = {lang}) }}\n"
    )


EDGE_VARIABLES = "?item ?itemLabel ?prop ?propLabel ?value ?valueLabel"


def between_query(heads: Sequence[str], tails: Sequence[str], language: str) -> str:
    """Every labelled edge from one of ``heads`` to one of ``tails`` (the paper's τ' filter, in the query).

    For a query's entity set, heads ⊆ Ent(C) and tails = Ent(C), so the answer is τ' itself rather than the
    whole one-hop neighbourhood; batched across queries, heads and tails are unions (a superset per query,
    filtered again by :func:`graphctx.knowledge.enhance.filter_one_hop`).
    """
    lang = string_literal(language)
    head_values = " ".join(iri(item) for item in dict.fromkeys(heads))
    tail_values = " ".join(iri(item) for item in dict.fromkeys(tails))
    return (
        f"{PREFIXES}SELECT {EDGE_VARIABLES} WHERE {{\n"
        f"  VALUES ?item {{ {head_values} }}\n"
        f"  VALUES ?value {{ {tail_values} }}\n"
        f"{_edge_patterns(lang)}{_edge_labels(lang)}}}\n"
    )


def one_hop_query(items: Sequence[str], language: str, limit: int) -> str:
    """Every labelled edge leaving ``items``, at most ``limit`` per item (one sub-select per item, ordered
    by property and value so the cut is deterministic; a popular item cannot crowd out the others)."""
    lang = string_literal(language)
    branches = " UNION\n".join(
        f"  {{ SELECT ?item ?prop ?value ?valueLabel WHERE {{\n"
        f"    VALUES ?item {{ {iri(item)} }}\n{_edge_patterns(lang)}"
        f"  }} ORDER BY ?prop ?value LIMIT {int(limit)} }}"
        for item in dict.fromkeys(items)
    )
    return f"{PREFIXES}SELECT {EDGE_VARIABLES} WHERE {{\n{branches}\n{_edge_labels(lang)}}}\n"


def gazetteer_query(surfaces: Iterable[str], language: str, package_prefix: str) -> str:
    """Mention-linking lookups: for each surface, the nameable items whose label or alias it is, with their
    label. Nameable: an instance of something (``wdt:P31``), or a package (IRI under ``package_prefix``)."""
    values = " ".join(string_literal(s, language) for s in dict.fromkeys(surfaces))
    lang = string_literal(language)
    return (
        f"{PREFIXES}PREFIX wdt: <http://www.wikidata.org/prop/direct/>\n"
        "SELECT DISTINCT ?surface ?item ?label ?package WHERE {\n"
        f"  VALUES ?surface {{ {values} }}\n"
        "  ?item rdfs:label|skos:altLabel ?surface .\n"
        f"  ?item rdfs:label ?label . FILTER(LANG(?label) = {lang})\n"
        f"  BIND(STRSTARTS(STR(?item), {string_literal(package_prefix)}) AS ?package)\n"
        "  FILTER(?package || EXISTS { ?item wdt:P31 ?type })\n"
        "}\n"
    )


def solution_rows(solutions: pyoxigraph.QuerySolutions) -> list[dict[str, str]]:
    """Plain ``{variable: value}`` rows (IRIs and literal lexical forms) of a SELECT result."""
    names = [variable.value for variable in solutions.variables]
    rows = []
    for solution in solutions:
        row = {}
        for name in names:
            term = solution[name]
            if term is not None:
                row[name] = term.value
        rows.append(row)
    return rows


def parse_json_results(payload: bytes | str) -> list[dict[str, str]]:
    """Rows of a SPARQL 1.1 JSON results document (what an endpoint such as WDQS returns).

    Raises ``SyntaxError`` (from pyoxigraph) on anything else, ``ValueError`` on an HTML page."""
    head = (payload[:512].decode(errors="replace") if isinstance(payload, bytes) else payload[:512]).lower()
    if head.lstrip().startswith(("<!doctype html", "<html")) or "<html" in head:
        title = re.search(r"<title>([^<]{0,120})", head)
        raise ValueError(
            f"an HTML page ({title.group(1).strip() if title else 'no title'}), not SPARQL results"
        )
    results = pyoxigraph.parse_query_results(payload, format=pyoxigraph.QueryResultsFormat.JSON)
    if not isinstance(results, pyoxigraph.QuerySolutions):
        raise ValueError("expected SELECT results (a 'results.bindings' document), got a boolean")
    return solution_rows(results)


class SparqlError(EndpointError):
    """The endpoint refused, kept failing, or answered something other than SPARQL results."""


@dataclass(frozen=True)
class KGFact:
    """One labelled one-hop edge of the knowledge graph."""

    head_id: str
    head_label: str
    relation_id: str
    relation_label: str
    tail_id: str
    tail_label: str


def facts_from_rows(rows: Iterable[dict[str, str]]) -> list[KGFact]:
    """One-hop query rows → facts; a missing item/property label falls back to the id's last segment."""
    facts = []
    for row in rows:
        prop = row["prop"]
        facts.append(
            KGFact(
                head_id=row["item"],
                head_label=row.get("itemLabel") or local_name(row["item"]),
                relation_id=prop,
                relation_label=row.get("propLabel") or local_name(prop),
                tail_id=row["value"],
                tail_label=row["valueLabel"],
            )
        )
    return facts


def local_name(iri_value: str) -> str:
    """The last path/fragment segment of an IRI (``.../entity/P31`` → ``P31``)."""
    return re.split(r"[/#:]", iri_value.rstrip("/#:"))[-1]
