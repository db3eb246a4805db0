"""A plug-in knowledge source's store: the plain labelled triples its ``triples()`` gives, written by
graphctx in the shape the SPARQL of :mod:`graphctx.knowledge.sparql` asks (Wikidata's), built once per
fingerprint of the plug-in (its class path, ``init_args`` and package sources) and cached.

For a source named ``mine``, an entity id ``x`` becomes ``urn:graphctx:kg:mine/entity/x`` (percent-encoded)
with its label as ``rdfs:label`` and its aliases and the normalised form of each name as ``skos:altLabel``
(what mention linking and the label lookup match); a relation id ``r`` becomes the property entity
``…/property/r`` carrying the relation's label and ``wikibase:directClaim`` ``…/direct/r``, the predicate
of its edges. The store folder is laid out like the local store's (``oxigraph/``, ``gazetteer.json``,
``stats.json``), so it opens as a :class:`~graphctx.knowledge.store.LocalKnowledgeGraph`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyoxigraph

from graphctx.cache import cache_root, fingerprint, publish_once, read_entry, write_json_atomic
from graphctx.errors import ConfigError
from graphctx.knowledge.plain_triples import Node, Triple
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.store import DIRECT_CLAIM, Property, TripleWriter, check_store
from graphctx.plugins import plugin_name, running, source_fingerprint

PLUGIN_STORE_FORMAT = 1
"""Bump when the RDF layout of a plug-in's store changes: it is part of the cache key."""


def _checked_node(node: Any, part: str, what: str) -> Node:
    if not isinstance(node, Node):
        raise ConfigError(f"{what}: a triple's {part} is {type(node).__name__}, not a Node(id, label)")
    if isinstance(node.aliases, str) or not isinstance(node.aliases, tuple | list):
        raise ConfigError(f"{what}: a triple's {part} {node!r}: aliases is not a tuple of names")
    names = [node.id, node.label, *node.aliases]
    if not all(isinstance(name, str) and name.strip() for name in names):
        raise ConfigError(f"{what}: a triple's {part} {node!r} has an empty or non-text id, label or alias")
    return node


def _checked(triple: Any, what: str) -> Triple:
    """``triple`` if it is a :class:`Triple` of three labelled :class:`Node` s, else one line naming it."""
    if not isinstance(triple, Triple):
        raise ConfigError(
            f"{what}: triples() gave {type(triple).__name__}, not a Triple(head, relation, tail)"
        )
    for part in ("head", "relation", "tail"):
        _checked_node(getattr(triple, part), part, what)
    return triple


def store_lines(name: str, triples: Callable[[], Iterable[Triple]], what: str) -> TripleWriter:
    """The N-Triples of what ``triples()`` gives (see the module docstring; an entity's first label wins)
    with their gazetteer; ``what`` names the source in errors (no triple at all is one)."""
    root = f"urn:graphctx:kg:{quote(name, safe='')}/"
    writer = TripleWriter()
    properties: dict[str, Property] = {}
    count = 0
    with running(what):
        for item in triples():
            triple = _checked(item, what)
            prop = properties.get(triple.relation.id)
            if prop is None:
                key = quote(triple.relation.id, safe="")
                prop = Property(f"{root}property/{key}", f"{root}direct/{key}", triple.relation.label)
                properties[triple.relation.id] = prop
                writer.lines.append(f"<{prop.entity}> <{DIRECT_CLAIM}> <{prop.direct}> .")
                writer.node(prop.entity, prop.label, triple.relation.aliases)
            head, tail = (f"{root}entity/{quote(node.id, safe='')}" for node in (triple.head, triple.tail))
            writer.node(head, triple.head.label, triple.head.aliases, kind="software")
            writer.node(tail, triple.tail.label, triple.tail.aliases, kind="software")
            writer.edge(head, prop, tail)
            count += 1
    if not count:
        raise ConfigError(f"{what}: triples() gave no triples; a knowledge source needs at least one fact")
    return writer


def store_path(source: Any, settings: KnowledgeSettings) -> Path:
    """Cache folder of a plug-in's store (key: format, language, the plug-in's fingerprint)."""
    key = fingerprint(PLUGIN_STORE_FORMAT, settings.language, source.name, source_fingerprint(source))
    return cache_root(settings.cache_dir or None) / "plugin-kg-store" / key


def build_plugin_store(source: Any, settings: KnowledgeSettings) -> Path:
    """Build the store of plug-in ``source`` (a :class:`~graphctx.knowledge.backends.PluginSource`) from its
    ``triples()``, or reuse the cached one; published whole or not at all."""
    target = store_path(source, settings)
    if read_entry(target, check_store) is not None:
        return target
    started = time.perf_counter()
    writer = store_lines(source.name, source.triples, f"knowledge.extra {plugin_name(source)}")
    with publish_once(target) as tmp:
        tmp.mkdir()
        store = pyoxigraph.Store(str(tmp / "oxigraph"))
        store.bulk_load(writer.ntriples(), format=pyoxigraph.RdfFormat.N_TRIPLES)
        store.flush()
        triples = len(store)
        del store
        (tmp / "gazetteer.json").write_text(json.dumps(writer.gazetteer, sort_keys=True))
        write_json_atomic(
            tmp / "stats.json", {"triples": triples, "build_seconds": round(time.perf_counter() - started, 2)}
        )
    return target
