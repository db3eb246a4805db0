"""The knowledge-source registry: every knowledge graph the enhancement can ask for one-hop facts, built
in or plugged in from a user's package, is a :class:`KnowledgeSource` that opens it and its
mention-linking gazetteer.

Built in: ``local`` (the embedded pyoxigraph store), ``wikidata`` (live SPARQL; the paper's) and ``tagwiki``
(the site's own tag wikis, synonyms and tag co-occurrence, :mod:`graphctx.knowledge.tagwiki`). More
sources may join the backend's facts (``knowledge.also: [tagwiki]``; each fact names its source). A config
adds its own LightningCLI style and selects it by name::

    knowledge:
      backend: my_kg
      extra:
        - class_path: mypkg.kg.MyKnowledgeSource
          init_args: {path: /data/my.csv}

A plug-in subclasses :class:`PluginSource` and gives plain labelled triples (:class:`Triple` of
:class:`Node` s, importable from here); docs/extending/knowledge-sources.md is the complete example.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from graphctx.errors import ConfigError
from graphctx.knowledge.kg import Gazetteer, GazetteerUnion, SparqlKnowledgeGraph
from graphctx.knowledge.plain_triples import Node, Triple
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.plugins import load_plugins, source_fingerprint

__all__ = ["KnowledgeSource", "Node", "PluginSource", "Triple"]


class KnowledgeSource:
    """One knowledge graph: its name, where it is read from, how it opens."""

    name: ClassVar[str]
    """Its name in ``knowledge.backend``."""

    def __init__(self, settings: KnowledgeSettings) -> None:
        self.settings = settings

    def location(self) -> str:
        """Where it is read from, for ``plan`` and results.md."""
        return self.settings.kg_dir

    def open(self) -> SparqlKnowledgeGraph:
        """The knowledge graph (built on first use, then cached, where it is built)."""
        raise NotImplementedError

    def gazetteer(self, kg: SparqlKnowledgeGraph | None = None) -> Gazetteer:
        """Its labels for mention linking, read through ``kg`` (opened if not given)."""
        return Gazetteer(kg=kg if kg is not None else self.open())

    def fingerprint(self) -> dict[str, Any]:
        """What its facts depend on beyond the ``knowledge`` settings (a plug-in: its code and arguments)."""
        return {}


class LocalSource(KnowledgeSource):
    name = "local"

    def open(self) -> SparqlKnowledgeGraph:
        from graphctx.knowledge.store import LocalKnowledgeGraph

        return LocalKnowledgeGraph.from_settings(self.settings)

    def gazetteer(self, kg: SparqlKnowledgeGraph | None = None) -> Gazetteer:
        from graphctx.knowledge.store import load_gazetteer

        return Gazetteer(load_gazetteer(self.settings))


class WikidataSource(KnowledgeSource):
    name = "wikidata"

    def location(self) -> str:
        return self.settings.sparql_endpoint

    def open(self) -> SparqlKnowledgeGraph:
        from graphctx.knowledge.wikidata import WikidataKnowledgeGraph

        return WikidataKnowledgeGraph.from_settings(self.settings)


class TagWikiSource(KnowledgeSource):
    name = "tagwiki"

    def location(self) -> str:
        return self.settings.tagwiki_dir or self.settings.kg_dir

    def open(self) -> SparqlKnowledgeGraph:
        from graphctx.knowledge.tagwiki import TagWikiKnowledgeGraph

        return TagWikiKnowledgeGraph.from_settings(self.settings)


BUILT_IN: tuple[type[KnowledgeSource], ...] = (LocalSource, WikidataSource, TagWikiSource)


class PluginSource(KnowledgeSource):
    """The base of a plug-in knowledge source: subclass it, set ``name`` and give your facts as plain
    labelled triples in :meth:`triples`; graphctx builds and caches the store the SPARQL queries read
    (:mod:`graphctx.knowledge.plugin_store`), links mentions to its labels and aliases, and labels its facts
    ``kg:<name>``. Its fingerprint (class path, ``init_args``, package sources) keys that store, the answers'
    resume guard and the enhanced-context cache."""

    class_path: str
    init_args: dict[str, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "open" in cls.__dict__ or "gazetteer" in cls.__dict__:
            raise TypeError(
                f"{cls.__qualname__} overrides open() or gazetteer(): a plug-in knowledge source gives "
                "triples() and graphctx builds its store"
            )

    def triples(self) -> Iterable[Triple]:
        """Every fact of the source, each a :class:`Triple` of labelled
        :class:`Node` s (read once per fingerprint, then cached)."""
        raise NotImplementedError

    def location(self) -> str:
        """Where it is read from, for ``plan`` and results.md (default: its class path)."""
        return self.class_path

    def open(self) -> SparqlKnowledgeGraph:
        from graphctx.knowledge.plugin_store import build_plugin_store
        from graphctx.knowledge.store import LocalKnowledgeGraph

        settings = self.settings
        graph = LocalKnowledgeGraph(
            build_plugin_store(self, settings),
            settings.language,
            settings.max_facts_per_entity,
            settings.sparql_batch_values,
        )
        graph.name = f"kg:{self.name}"
        return graph

    def gazetteer(self, kg: SparqlKnowledgeGraph | None = None) -> Gazetteer:
        from graphctx.knowledge.plugin_store import build_plugin_store

        return Gazetteer(json.loads((build_plugin_store(self, self.settings) / "gazetteer.json").read_text()))

    def fingerprint(self) -> dict[str, Any]:
        return source_fingerprint(self)


def knowledge_sources(settings: KnowledgeSettings) -> dict[str, KnowledgeSource]:
    """Every knowledge source of a config by name: the built-ins, then ``knowledge.extra``."""
    sources: dict[str, KnowledgeSource] = {cls.name: cls(settings) for cls in BUILT_IN}
    plugins = load_plugins(settings.extra, PluginSource, "knowledge.extra", sources, settings)
    return sources | {source.name: source for source in plugins}


def selected_sources(settings: KnowledgeSettings) -> list[KnowledgeSource]:
    """The sources ``knowledge.backend`` and ``knowledge.also`` name, in that order."""
    sources = knowledge_sources(settings)
    for key, names in (("knowledge.backend", [settings.backend]), ("knowledge.also", settings.also)):
        unknown = [name for name in names if name not in sources]
        if unknown:
            shown = repr(unknown[0]) if key == "knowledge.backend" else unknown
            raise ConfigError(f"{key}: unknown backend {shown}; choose from {list(sources)}")
    return [sources[name] for name in settings.sources]


def knowledge_source(settings: KnowledgeSettings) -> KnowledgeSource:
    """The source ``knowledge.backend`` names."""
    return selected_sources(settings)[0]


def build_knowledge_graph(settings: KnowledgeSettings) -> SparqlKnowledgeGraph:
    """The knowledge graph ``knowledge.backend`` names."""
    return knowledge_source(settings).open()


def build_knowledge_graphs(settings: KnowledgeSettings) -> list[SparqlKnowledgeGraph]:
    """The knowledge graphs of ``knowledge.backend`` and ``knowledge.also``, in that order."""
    return [source.open() for source in selected_sources(settings)]


def build_gazetteer(
    settings: KnowledgeSettings, kg: SparqlKnowledgeGraph | Sequence[SparqlKnowledgeGraph] | None = None
) -> Gazetteer:
    """The mention-linking gazetteer of ``knowledge.backend`` and ``knowledge.also`` (united, the backend's
    label first), each read through its opened graph in ``kg`` where it has none of its own."""
    sources = selected_sources(settings)
    graphs = [kg] if isinstance(kg, SparqlKnowledgeGraph) else list(kg or [None] * len(sources))
    members = [source.gazetteer(graph) for source, graph in zip(sources, graphs, strict=True)]
    return members[0] if len(members) == 1 else GazetteerUnion(members)


def also_fingerprints(settings: KnowledgeSettings) -> dict[str, Any]:
    """The fingerprints of the plug-in sources in ``knowledge.also`` (built-ins have none)."""
    return {source.name: part for source in selected_sources(settings)[1:] if (part := source.fingerprint())}


def silent_plugins(
    settings: KnowledgeSettings, facts_by_source: Mapping[str, int], questions: int
) -> list[str]:
    """A warning line for each plug-in source of ``knowledge.backend`` / ``knowledge.also`` that gave no
    fact to any of ``questions`` enhanced questions (``facts_by_source``: facts kept per ``kg:<name>``)."""
    if not settings.enabled or not questions:
        return []
    return [
        f"warning: knowledge source {source.name} ({source.class_path}) gave no fact to any of the "
        f"{questions} enhanced questions: no mention linked to its labels or aliases, or none of its facts "
        "reached another entity of a context"
        for source in selected_sources(settings)
        if isinstance(source, PluginSource) and not facts_by_source.get(f"kg:{source.name}")
    ]
