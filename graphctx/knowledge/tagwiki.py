"""A knowledge source from the site itself: the dump's tag wikis, tag synonyms and tag co-occurrence.

Read from a Stack Exchange site folder (``knowledge.tagwiki_dir``, else ``knowledge.kg_dir``):
``Tags.xml`` (each tag's ``ExcerptPostId`` and ``WikiPostId``), ``Posts.xml`` (PostTypeId 4: tag-wiki
excerpts, 5: tag-wiki bodies, 1: questions and their tags) and ``TagSynonyms.xml`` when present. Every tag
is a node labelled with its name, an instance of ``Stack Exchange tag`` (so mention linking finds it), with
altLabels: the name with spaces for hyphens (``stake-pool`` → ``stake pool``) and each synonym tag's name.
Facts, as edges of local properties in the same RDF shape as the local store:

* ``is described as``: tag → each sentence of its excerpt (a sentence node);
* ``is described with reference to``: tag A → tag B when A's excerpt or wiki body names B (or an altLabel
  of B) as a whole word;
* ``is often asked about together with``: tag A → tag B (both ways) when at least
  :data:`MIN_SHARED_QUESTIONS` questions carry both; each tag keeps its :data:`PARTNERS_PER_TAG` partners
  with most shared questions (ties by name).

The enhancement keeps a fact only when its tail is one of the context's entities (τ'), so excerpt
sentences, whose tails are sentences, are in the graph for one-hop queries but never survive τ'. The store is
built once per set of input files and cached like the local store; :func:`tagwiki_ntriples` gives its
N-Triples file, which ``knowledge.ntriples`` loads alongside the local store (``backend: local``).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from urllib.parse import quote

import pyoxigraph
import spacy
from spacy.language import Language

from graphctx.cache import cache_root, file_digest, fingerprint, publish_once, read_entry, write_json_atomic
from graphctx.data.dumpfiles import POSTS, resolve_dump
from graphctx.data.html import html_to_text
from graphctx.data.stackexchange import iter_rows, parse_tags
from graphctx.errors import ConfigError
from graphctx.knowledge.entities import normalise_entity
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.store import (
    DIRECT_CLAIM,
    GX,
    INSTANCE_OF,
    RDFS_LABEL,
    SKOS_ALT,
    LocalKnowledgeGraph,
    Property,
    nt_literal,
)

TAGWIKI_FORMAT = 1
"""Bump when the RDF layout changes: it is part of the cache key."""
TAGS, SYNONYMS = "Tags.xml", "TagSynonyms.xml"
EXCERPT, WIKI, QUESTION = "4", "5", "1"
MIN_SHARED_QUESTIONS = 2
"""Fewest questions two tags must share for a co-occurrence fact (one shared question is chance)."""
PARTNERS_PER_TAG = 10
"""Most co-occurrence facts leaving one tag (a popular tag co-occurs with nearly every other)."""

TAG_TYPE = f"{GX}tagwiki:tag"
DESCRIBED_AS = Property(f"{GX}property:tagwiki-excerpt", f"{GX}direct:tagwiki-excerpt", "is described as")
REFERS_TO = Property(
    f"{GX}property:tagwiki-mentions", f"{GX}direct:tagwiki-mentions", "is described with reference to"
)
ASKED_WITH = Property(
    f"{GX}property:tag-cooccurrence", f"{GX}direct:tag-cooccurrence", "is often asked about together with"
)
PROPERTIES = (INSTANCE_OF, DESCRIBED_AS, REFERS_TO, ASKED_WITH)


@dataclass
class TagWiki:
    """What the dump says about its tags: excerpt and body text, synonyms, and questions' tag lists."""

    tags: list[str] = field(default_factory=list)
    excerpts: dict[str, str] = field(default_factory=dict)
    """Tag → excerpt text (PostTypeId 4, HTML converted)."""
    bodies: dict[str, str] = field(default_factory=dict)
    """Tag → wiki body text (PostTypeId 5)."""
    synonyms: dict[str, list[str]] = field(default_factory=dict)
    """Tag → the synonym tags that map onto it (TagSynonyms.xml: Source → Target)."""
    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(tag A, tag B), A < B → questions tagged with both."""


def site_folder(settings: KnowledgeSettings) -> tuple[str, str]:
    """The setting naming the site folder (``knowledge.tagwiki_dir`` when set, else ``knowledge.kg_dir``)
    and its value."""
    if settings.tagwiki_dir:
        return "knowledge.tagwiki_dir", settings.tagwiki_dir
    return "knowledge.kg_dir", settings.kg_dir


def site_files(settings: KnowledgeSettings) -> list[Path]:
    """The site files the tag-wiki store is built from, refused in one line naming the setting."""
    key, value = site_folder(settings)
    folder = Path(value)
    if not value or not folder.is_dir():
        raise ConfigError(
            f"{key}: {value!r} is not a folder; the tagwiki knowledge source reads a "
            f"Stack Exchange site folder holding {TAGS} and {POSTS}"
        )
    missing = [name for name in (TAGS, POSTS) if not (folder / name).is_file()]
    if missing:
        raise ConfigError(
            f"{key}: {folder} lacks {' and '.join(missing)} (the tagwiki knowledge source reads a "
            "Stack Exchange site folder)"
        )
    return [folder / name for name in (TAGS, POSTS, SYNONYMS) if (folder / name).is_file()]


def _rows(path: Path, root: str) -> Iterator[dict[str, str]]:
    with open(path, "rb") as stream:
        yield from iter_rows(stream, str(path), root)


def read_tag_wiki(folder: Path) -> TagWiki:
    """Read a site folder's tags, tag wikis, synonyms and question tags (the data layer's row reader)."""
    wiki = TagWiki()
    excerpt_of: dict[str, str] = {}
    body_of: dict[str, str] = {}
    for row in _rows(folder / TAGS, "tags"):
        tag = row.get("TagName", "")
        if not tag:
            continue
        wiki.tags.append(tag)
        if row.get("ExcerptPostId"):
            excerpt_of[row["ExcerptPostId"]] = tag
        if row.get("WikiPostId"):
            body_of[row["WikiPostId"]] = tag
    if (folder / SYNONYMS).is_file():
        for row in _rows(folder / SYNONYMS, "tagsynonyms"):
            source, target = row.get("SourceTagName"), row.get("TargetTagName")
            if source and target and source != target:
                wiki.synonyms.setdefault(target, []).append(source)
    dump = resolve_dump(folder)
    for name, stream in dump.members():
        if name != POSTS:
            continue
        for row in iter_rows(stream, str(dump.posts), "posts"):
            kind, post_id = row.get("PostTypeId"), row.get("Id", "")
            if kind == EXCERPT and post_id in excerpt_of:
                wiki.excerpts[excerpt_of[post_id]] = html_to_text(row.get("Body", ""))
            elif kind == WIKI and post_id in body_of:
                wiki.bodies[body_of[post_id]] = html_to_text(row.get("Body", ""))
            elif kind == QUESTION:
                tags = sorted(set(parse_tags(row.get("Tags"))))
                wiki.pairs.update((a, b) for i, a in enumerate(tags) for b in tags[i + 1 :])
    return wiki


def tag_node(site: str, tag: str) -> str:
    """The IRI of a tag: ``urn:graphctx:tagwiki:<site>/<percent-encoded tag>``."""
    return f"{GX}tagwiki:{quote(site, safe='')}/{quote(tag, safe='')}"


def aliases(tag: str, synonyms: list[str]) -> list[str]:
    """The names a tag is linked by besides its own: its synonyms, and each with spaces for hyphens."""
    names = [tag, *synonyms]
    return list(
        dict.fromkeys(form for name in names for form in (name, name.replace("-", " ")) if form != tag)
    )


def cooccurrence(pairs: Counter[tuple[str, str]]) -> dict[str, list[str]]:
    """Tag → its partners kept as co-occurrence tails (see the module docstring), most shared first."""
    partners: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for (a, b), count in pairs.items():
        if count >= MIN_SHARED_QUESTIONS:
            partners[a].append((-count, b))
            partners[b].append((-count, a))
    return {tag: [name for _, name in sorted(found)[:PARTNERS_PER_TAG]] for tag, found in partners.items()}


@cache
def _sentencizer() -> Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def excerpt_sentences(text: str) -> list[str]:
    """The sentences of an excerpt (spaCy's rule-based sentencizer), whitespace collapsed."""
    sentences = (" ".join(sent.text.split()) for sent in _sentencizer()(text).sents)
    return [sentence for sentence in sentences if sentence]


def mentioned_tags(text: str, names: dict[str, str]) -> list[str]:
    """Tags whose name or altLabel (``names``: normalised form → tag) occurs in ``text`` as a whole word,
    case-insensitively, in order of first mention."""
    found: dict[int, str] = {}
    for form, tag in names.items():
        match = re.search(rf"(?<![\w-]){re.escape(form)}(?![\w-])", text, re.IGNORECASE)
        if match:
            found.setdefault(match.start(), tag)
    return list(dict.fromkeys(tag for _, tag in sorted(found.items())))


def tagwiki_lines(site: str, wiki: TagWiki) -> list[str]:
    """The N-Triples lines of a site's tag-wiki graph (see the module docstring)."""
    lines = [f"<{TAG_TYPE}> <{RDFS_LABEL}> {nt_literal('Stack Exchange tag')} ."]
    for prop in PROPERTIES:
        lines.append(f"<{prop.entity}> <{DIRECT_CLAIM}> <{prop.direct}> .")
        lines.append(f"<{prop.entity}> <{RDFS_LABEL}> {nt_literal(prop.label)} .")
    names: dict[str, str] = {}
    for tag in wiki.tags:
        node = tag_node(site, tag)
        lines.append(f"<{node}> <{RDFS_LABEL}> {nt_literal(tag)} .")
        lines.append(f"<{node}> <{INSTANCE_OF.direct}> <{TAG_TYPE}> .")
        for alias in aliases(tag, wiki.synonyms.get(tag, [])):
            lines.append(f"<{node}> <{SKOS_ALT}> {nt_literal(alias)} .")
        for form in (tag, *aliases(tag, wiki.synonyms.get(tag, []))):
            names.setdefault(normalise_entity(form), tag)
    for tag in wiki.tags:
        node = tag_node(site, tag)
        for index, sentence in enumerate(excerpt_sentences(wiki.excerpts.get(tag, ""))):
            sentence_node = f"{node}/excerpt/{index}"
            lines.append(f"<{sentence_node}> <{RDFS_LABEL}> {nt_literal(sentence)} .")
            lines.append(f"<{node}> <{DESCRIBED_AS.direct}> <{sentence_node}> .")
        text = f"{wiki.excerpts.get(tag, '')}\n{wiki.bodies.get(tag, '')}"
        for other in mentioned_tags(text, names):
            if other != tag:
                lines.append(f"<{node}> <{REFERS_TO.direct}> <{tag_node(site, other)}> .")
    known = set(wiki.tags)
    for tag, partners in sorted(cooccurrence(wiki.pairs).items()):
        for other in partners:
            if tag in known and other in known:
                lines.append(f"<{tag_node(site, tag)}> <{ASKED_WITH.direct}> <{tag_node(site, other)}> .")
    return lines


def store_path(settings: KnowledgeSettings) -> Path:
    """Cache folder of the tag-wiki store (key: format, language, site name, digests of its files)."""
    files = site_files(settings)
    site = Path(site_folder(settings)[1]).resolve().name
    key = fingerprint(TAGWIKI_FORMAT, settings.language, site, [file_digest(path) for path in files])
    return cache_root(settings.cache_dir or None) / "tagwiki-store" / key


def _check_store(folder: Path) -> Path:
    """``folder`` if its stats and N-Triples read back and its store opens; else it raises."""
    if "triples" not in json.loads((folder / "stats.json").read_text()):
        raise ValueError(f"{folder}: stats.json is incomplete")
    if not (folder / "tagwiki.nt").is_file():
        raise ValueError(f"{folder}: tagwiki.nt is missing")
    store = pyoxigraph.Store.read_only(str(folder / "oxigraph"))
    del store  # opened only to check it
    return folder


def build_tagwiki_store(settings: KnowledgeSettings) -> Path:
    """Build the tag-wiki store (or reuse the cached one) and return its folder: ``oxigraph/`` (the store,
    opened like the local one), ``tagwiki.nt`` and ``stats.json``, published whole or not at all."""
    target = store_path(settings)
    if read_entry(target, _check_store) is not None:
        return target
    started = time.perf_counter()
    folder = Path(site_folder(settings)[1])
    wiki = read_tag_wiki(folder)
    ntriples = ("\n".join(tagwiki_lines(folder.resolve().name, wiki)) + "\n").encode()
    with publish_once(target) as tmp:
        tmp.mkdir()
        (tmp / "tagwiki.nt").write_bytes(ntriples)
        store = pyoxigraph.Store(str(tmp / "oxigraph"))
        store.bulk_load(ntriples, format=pyoxigraph.RdfFormat.N_TRIPLES)
        store.flush()
        triples = len(store)
        del store
        write_json_atomic(
            tmp / "stats.json",
            {
                "triples": triples,
                "tags": len(wiki.tags),
                "excerpts": sum(1 for text in wiki.excerpts.values() if text),
                "bodies": sum(1 for text in wiki.bodies.values() if text),
                "synonyms": sum(len(names) for names in wiki.synonyms.values()),
                "build_seconds": round(time.perf_counter() - started, 2),
            },
        )
    return target


def tagwiki_ntriples(settings: KnowledgeSettings) -> Path:
    """The site's tag-wiki graph as an N-Triples file (built if needed), for ``knowledge.ntriples``."""
    return build_tagwiki_store(settings) / "tagwiki.nt"


class TagWikiKnowledgeGraph(LocalKnowledgeGraph):
    """The tag-wiki store, opened read-only, answering the same SPARQL as the local store and Wikidata."""

    name = "kg:tagwiki"

    @classmethod
    def from_settings(cls, settings: KnowledgeSettings) -> TagWikiKnowledgeGraph:
        return cls(
            build_tagwiki_store(settings),
            settings.language,
            settings.max_facts_per_entity,
            settings.sparql_batch_values,
        )
