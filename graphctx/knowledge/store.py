r"""The local knowledge graph: an embedded pyoxigraph store in Wikidata's RDF shape, built once and cached.

Sources (``settings.kg_dir``, default ``../shared/data/kg``):

* ``software_entities.sql`` — 658 software entities, 486 with Wikidata ids. Entities with a QID keep
  Wikidata's IRI (``wd:Q306144`` for Nginx) so local and live facts agree. Facts: ``instance of`` its
  type (``operating system``, ``application``...), and the typed relations, read child → parent:
  ``operating system`` (P306: *Docker runs on Linux*), ``programmed in`` (P277), ``part of`` (P361) and
  ``plugin of``. Mentions become ``skos:altLabel``.
* ``debian_bookworm_packages.jsonl.gz`` — 63,681 packages, IRI ``https://packages.debian.org/bookworm/<name>``.
  Facts: ``depends on software`` (P1547, first alternative of each Depends clause), ``recommends``,
  ``provides`` and ``Debian section``. Versions, descriptions and homepages are not loaded (no entity
  tails, so never one-hop facts).
* any N-Triples files in ``settings.ntriples``: e.g. a subset of a Wikidata truthy dump. Every
  ``wdt:P…`` predicate found gets its ``wd:P… wikibase:directClaim wdt:P…`` link, so the one-hop query
  sees it. A subset for the software domain can be cut with::

      E='<http://www.wikidata.org/entity/'
      P='<http://www.wikidata.org/prop/direct/P(31|279|306|277|1547|178|361|400)>'
      L='<http://www.w3.org/2000/01/rdf-schema#label>'
      zcat latest-truthy.nt.gz \
        | grep -E "^${E}[QP][0-9]+> (${P} ${E}Q[0-9]+>|${L} \".*\"@en) [.]$" \
        > wikidata-software.nt

  (keep the properties you want in the ``P(...)`` group; labels of the ``wd:P…`` property entities give
  the relation names). Large cuts load with pyoxigraph's streaming ``bulk_load``.

Every node and property carries an ``rdfs:label``@en; the normalised form of each label and alias is also
an ``skos:altLabel`` so lookups by :func:`~graphctx.knowledge.entities.normalise_entity` keys hit.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph

from graphctx.cache import cache_root, file_digest, fingerprint, publish_once, read_entry, write_json_atomic
from graphctx.errors import ConfigError, DataError
from graphctx.knowledge.entities import normalise_entity
from graphctx.knowledge.kg import SparqlKnowledgeGraph
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.sparql import PACKAGE_PREFIX, iri, solution_rows

STORE_FORMAT = 1
"""Bump when the RDF layout changes: it is part of the cache key."""

SOFTWARE_SQL = "software_entities.sql"
DEBIAN_JSONL = "debian_bookworm_packages.jsonl.gz"

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
GX = "urn:graphctx:"
DEBIAN = PACKAGE_PREFIX + "bookworm/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SKOS_ALT = "http://www.w3.org/2004/02/skos/core#altLabel"
DIRECT_CLAIM = "http://wikiba.se/ontology#directClaim"


@dataclass(frozen=True)
class Property:
    """A relation: the property entity (carries the label) and the direct predicate used in edges."""

    entity: str
    direct: str
    label: str


def _wikidata_property(pid: str, label: str) -> Property:
    return Property(WD + pid, WDT + pid, label)


def _local_property(key: str, label: str) -> Property:
    return Property(f"{GX}property:{key}", f"{GX}direct:{key}", label)


INSTANCE_OF = _wikidata_property("P31", "instance of")
OPERATING_SYSTEM = _wikidata_property("P306", "operating system")
PROGRAMMED_IN = _wikidata_property("P277", "programmed in")
PART_OF = _wikidata_property("P361", "part of")
DEPENDS_ON = _wikidata_property("P1547", "depends on software")
PLUGIN_OF = _local_property("plugin-of", "plugin of")
RECOMMENDS = _local_property("recommends", "recommends")
PROVIDES = _local_property("provides", "provides")
DEBIAN_SECTION = _local_property("debian-section", "Debian section")
PROPERTIES = (
    INSTANCE_OF,
    OPERATING_SYSTEM,
    PROGRAMMED_IN,
    PART_OF,
    DEPENDS_ON,
    PLUGIN_OF,
    RECOMMENDS,
    PROVIDES,
    DEBIAN_SECTION,
)

SOFTWARE_TYPE_LABELS = {
    "Technology": "technology",
    "App": "application",
    "VM": "virtual machine",
    "HW": "hardware",
    "Plugin": "plugin",
    "OS": "operating system",
    "Runlib": "runtime library",
    "App Server": "application server",
    "Lang": "programming language",
    "Runtime": "runtime environment",
    "Storage": "storage system",
    "Lib": "software library",
}
"""Readable names of the SQL dump's 12 entity types (the tails of ``instance of``)."""

_QID = re.compile(r"^Q[0-9]+$")
_PACKAGE_NAME = re.compile(r"^\s*([a-z0-9][a-z0-9+.-]*)")
_ECHAR = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"}


def nt_literal(text: str, language: str = "en") -> str:
    """An N-Triples language-tagged literal (quotes, backslashes, line breaks escaped)."""
    body = "".join(_ECHAR.get(ch, f"\\u{ord(ch):04X}" if ord(ch) < 0x20 else ch) for ch in text)
    return f'"{body}"@{language}'


def software_label(entity_name: str) -> str:
    """Display label of a dump name: ``Linux|Ubuntu`` → ``Ubuntu``, ``Windows|*`` → ``Windows``."""
    parts = [p.strip() for p in entity_name.replace("<>", " ").split("|") if p.strip() not in ("", "*")]
    return parts[-1] if parts else entity_name.strip()


def first_package(clause: str) -> str | None:
    """The package a Debian relation clause names first: ``libssl3 (>= 3.0.0) | libssl1`` → ``libssl3``."""
    match = _PACKAGE_NAME.match(clause)
    return match.group(1) if match else None


class TripleWriter:
    """Collects N-Triples lines plus the gazetteer (normalised surface → display label) per kind."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.labelled: set[str] = set()
        self.gazetteer: dict[str, dict[str, str]] = {"software": {}, "package": {}}

    def edge(self, subject: str, prop: Property, obj: str) -> None:
        self.lines.append(f"<{subject}> <{prop.direct}> <{obj}> .")

    def node(self, node: str, label: str, aliases: tuple[str, ...] = (), kind: str | None = None) -> None:
        """Label a node once (first label wins) and add aliases and normalised forms as altLabels."""
        if node not in self.labelled:
            self.labelled.add(node)
            self.lines.append(f"<{node}> <{RDFS_LABEL}> {nt_literal(label)} .")
        for alias in {label, *aliases}:
            for form in {alias, normalise_entity(alias)} - {label, ""}:
                self.lines.append(f"<{node}> <{SKOS_ALT}> {nt_literal(form)} .")
            if kind:
                self.gazetteer[kind].setdefault(normalise_entity(alias), label)

    def properties(self) -> None:
        for prop in PROPERTIES:
            self.lines.append(f"<{prop.entity}> <{DIRECT_CLAIM}> <{prop.direct}> .")
            self.node(prop.entity, prop.label)

    def ntriples(self) -> bytes:
        return ("\n".join(self.lines) + "\n").encode()


def _software_triples(sql_path: Path, writer: TripleWriter) -> None:
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(sql_path.read_text(encoding="utf-8"))
    except sqlite3.Error as error:
        raise ValueError(f"{sql_path}: not a loadable SQLite dump ({error})") from error
    types = dict(db.execute("SELECT id, entity_type_name FROM entity_types"))
    mentions: dict[int, list[str]] = {}
    for entity_id, mention in db.execute("SELECT entity_id, entity_mention_name FROM entity_mentions"):
        mentions.setdefault(entity_id, []).append(mention)
    nodes: dict[int, str] = {}
    for entity_id, name, type_id, link in db.execute(
        "SELECT id, entity_name, entity_type_id, external_link FROM entities ORDER BY id"
    ):
        try:
            external = ast.literal_eval(link) if link else {}
        except (ValueError, SyntaxError) as error:
            raise ValueError(f"{sql_path}: entities row {entity_id}: bad external_link {link!r}") from error
        qid = external.get("qid", "") if isinstance(external, dict) else ""
        node = WD + qid if _QID.match(qid) else f"{GX}software:{entity_id}"
        nodes[entity_id] = node
        aliases = (name.replace("|*", "").replace("|", " "), *mentions.get(entity_id, ()))
        writer.node(node, software_label(name), aliases, kind="software")
        type_node = f"{GX}software-type:{type_id}"
        writer.node(
            type_node, SOFTWARE_TYPE_LABELS.get(types.get(type_id, ""), types.get(type_id, "software"))
        )
        writer.edge(node, INSTANCE_OF, type_node)
    relations = db.execute(
        "SELECT r.id, pt.entity_type_name, r.entity_parent_id, ct.entity_type_name, r.entity_child_id "
        "FROM entity_relations r JOIN entity_types pt ON pt.id = r.entity_parent_type_id "
        "JOIN entity_types ct ON ct.id = r.entity_child_type_id"
    )
    for row_id, parent_type, parent, child_type, child in relations:
        if parent not in nodes or child not in nodes:
            raise ValueError(f"{sql_path}: entity_relations row {row_id} names a missing entity")
        if parent_type == "OS":
            prop = OPERATING_SYSTEM
        elif parent_type == "Lang":
            prop = PROGRAMMED_IN
        elif child_type == "Plugin":
            prop = PLUGIN_OF
        else:
            prop = PART_OF
        writer.edge(nodes[child], prop, nodes[parent])
    db.close()


def _debian_records(path: Path) -> Iterator[dict[str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            try:
                record = json.loads(line)
                record["Package"]
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ValueError(f"{path}: line {line_number}: not a package record ({error})") from error
            yield record


def _debian_triples(path: Path, writer: TripleWriter) -> None:
    for record in _debian_records(path):
        name = record["Package"]
        node = DEBIAN + name
        writer.node(node, name, kind="package")
        for field, prop in (("Depends", DEPENDS_ON), ("Recommends", RECOMMENDS), ("Provides", PROVIDES)):
            for clause in record.get(field, "").split(","):
                target = first_package(clause)
                if target and target != name:
                    writer.node(DEBIAN + target, target, kind="package")
                    writer.edge(node, prop, DEBIAN + target)
        section = record.get("Section", "").rsplit("/", 1)[-1]
        if section:
            section_node = f"{GX}debian-section:{section}"
            writer.node(section_node, section)
            writer.edge(node, DEBIAN_SECTION, section_node)


def _link_direct_claims(store: pyoxigraph.Store) -> None:
    """Give every ``wdt:P…`` predicate of loaded N-Triples its ``wikibase:directClaim`` property entity."""
    query = f"SELECT DISTINCT ?p WHERE {{ ?s ?p ?o FILTER(STRSTARTS(STR(?p), {json.dumps(WDT)})) }}"
    quads = [
        pyoxigraph.Quad(
            pyoxigraph.NamedNode(WD + row["p"][len(WDT) :]),
            pyoxigraph.NamedNode(DIRECT_CLAIM),
            pyoxigraph.NamedNode(row["p"]),
        )
        for row in solution_rows(store.query(query))
    ]
    store.extend(quads)


def _ntriples_gazetteer(store: pyoxigraph.Store, writer: TripleWriter, language: str) -> None:
    query = (
        f"SELECT ?label WHERE {{ ?s <{RDFS_LABEL}> ?label FILTER(LANG(?label) = {json.dumps(language)}) }}"
    )
    for row in solution_rows(store.query(query)):
        writer.gazetteer["software"].setdefault(normalise_entity(row["label"]), row["label"])


def kg_sources(settings: KnowledgeSettings) -> list[Path]:
    """The files the local store is built from, refused in one line naming the setting when there are none
    or one is missing (entry points call it before writing anything)."""
    folder = Path(settings.kg_dir) if settings.kg_dir else None
    builtin = [folder / SOFTWARE_SQL, folder / DEBIAN_JSONL] if folder is not None else []
    if not builtin and not settings.ntriples:
        raise ConfigError(
            "knowledge.kg_dir: empty and knowledge.ntriples lists no file, so the local KG has no source; "
            "set either (or knowledge.enabled: false)"
        )
    if folder is not None and not folder.is_dir():
        raise ConfigError(f"knowledge.kg_dir: {folder} is not a folder")
    missing = [path.name for path in builtin if not path.is_file()]
    if missing:
        raise ConfigError(
            f"knowledge.kg_dir: {folder} lacks {' and '.join(missing)} (the local KG's sources: "
            f"{SOFTWARE_SQL}, {DEBIAN_JSONL}; ../shared/data/kg has both)"
        )
    for path in settings.ntriples:
        if not Path(path).is_file():
            raise ConfigError(f"knowledge.ntriples: {path} not found")
    return [*builtin, *map(Path, settings.ntriples)]


def store_path(settings: KnowledgeSettings) -> Path:
    """Cache folder of the store for these sources (key: format version + digests of every input file)."""
    sources = kg_sources(settings)
    key = fingerprint(STORE_FORMAT, settings.language, [file_digest(s) for s in sources])
    return cache_root(settings.cache_dir or None) / "kg-store" / key


def check_store(folder: Path) -> Path:
    """``folder`` if its stats and gazetteer read back and its RocksDB store opens; else it raises."""
    stats = json.loads((folder / "stats.json").read_text())
    gazetteer = json.loads((folder / "gazetteer.json").read_text())
    if "triples" not in stats or set(gazetteer) != {"software", "package"}:
        raise ValueError(f"{folder}: stats.json or gazetteer.json is incomplete")
    store = pyoxigraph.Store.read_only(str(folder / "oxigraph"))
    del store  # opened only to check it
    return folder


def build_store(settings: KnowledgeSettings) -> Path:
    """Build the local store (or reuse the cached one) and return its folder.

    The folder holds ``oxigraph/`` (the RocksDB store), ``gazetteer.json`` and ``stats.json``; it is written
    under a temporary name and renamed into place, so a killed build leaves nothing behind. A cached store
    that does not open (or whose JSON files do not read back) is moved aside and built again.
    """
    target = store_path(settings)
    if read_entry(target, check_store) is not None:
        return target
    started = time.perf_counter()
    writer = TripleWriter()
    writer.properties()
    if settings.kg_dir:
        _software_triples(Path(settings.kg_dir) / SOFTWARE_SQL, writer)
        _debian_triples(Path(settings.kg_dir) / DEBIAN_JSONL, writer)
    with publish_once(target) as tmp:
        tmp.mkdir()
        store = pyoxigraph.Store(str(tmp / "oxigraph"))
        store.bulk_load(writer.ntriples(), format=pyoxigraph.RdfFormat.N_TRIPLES)
        for path in settings.ntriples:
            try:
                store.bulk_load(path=path, format=pyoxigraph.RdfFormat.N_TRIPLES)
            except SyntaxError as error:
                raise DataError(f"knowledge.ntriples: {path}: {error}") from error
        if settings.ntriples:
            _link_direct_claims(store)
            _ntriples_gazetteer(store, writer, settings.language)
        store.flush()
        triples = len(store)
        del store
        (tmp / "gazetteer.json").write_text(json.dumps(writer.gazetteer, sort_keys=True))
        size = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file())
        write_json_atomic(
            tmp / "stats.json",
            {"triples": triples, "build_seconds": round(time.perf_counter() - started, 2), "bytes": size},
        )
    return target


def load_gazetteer(settings: KnowledgeSettings) -> dict[str, dict[str, str]]:
    """``{"software": {key: label}, "package": {key: label}}`` of the local store (built if needed)."""
    return json.loads((build_store(settings) / "gazetteer.json").read_text())


class LocalKnowledgeGraph(SparqlKnowledgeGraph):
    """The embedded store, opened read-only, answering the same SPARQL as Wikidata."""

    name = "kg:local"

    def __init__(
        self, path: Path, language: str = "en", max_facts_per_entity: int = 200, batch_values: int = 400
    ) -> None:
        super().__init__(language, max_facts_per_entity, batch_values=batch_values)
        self.path = Path(path)
        self.store = pyoxigraph.Store.read_only(str(self.path / "oxigraph"))

    @classmethod
    def from_settings(cls, settings: KnowledgeSettings) -> LocalKnowledgeGraph:
        return cls(
            build_store(settings),
            settings.language,
            settings.max_facts_per_entity,
            settings.sparql_batch_values,
        )

    def select(self, query: str) -> list[dict[str, str]]:
        return solution_rows(self.store.query(query))

    def label(self, node: str) -> str | None:
        """The English label of a node, or ``None``."""
        query = f"SELECT ?l WHERE {{ {iri(node)} <{RDFS_LABEL}> ?l }} LIMIT 1"
        rows = self.select(query)
        return rows[0]["l"] if rows else None
