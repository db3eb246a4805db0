"""The tag-wiki knowledge source on the cardano dump: the store, its facts (checked against counts made here
from Posts.xml with the standard library), linking, synonyms, bad input, selection as a backend, loading
alongside the local store, and end-to-end enhancement."""

from __future__ import annotations

import itertools
import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from graphctx.errors import ConfigError, DataError
from graphctx.knowledge.backends import build_gazetteer, build_knowledge_graph
from graphctx.knowledge.budget import QAPair, build_token_counter
from graphctx.knowledge.enhance import build_enhancer
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.store import LocalKnowledgeGraph
from graphctx.knowledge.tagwiki import (
    PARTNERS_PER_TAG,
    TagWikiKnowledgeGraph,
    build_tagwiki_store,
    tag_node,
    tagwiki_ntriples,
)

DAEDALUS_EXCERPT = "A full-node wallet for Cardano's currency, Ada and its native tokens."


@pytest.fixture(scope="module")
def tagwiki_settings(cardano_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> KnowledgeSettings:
    cache = tmp_path_factory.mktemp("tagwiki-cache")
    return KnowledgeSettings(backend="tagwiki", kg_dir=str(cardano_dir), cache_dir=str(cache))


@pytest.fixture(scope="module")
def tagwiki(tagwiki_settings: KnowledgeSettings) -> TagWikiKnowledgeGraph:
    return TagWikiKnowledgeGraph.from_settings(tagwiki_settings)


def _node(tag: str) -> str:
    return tag_node("cardano", tag)


def _shared_questions(cardano_dir: Path) -> Counter[tuple[str, str]]:
    """(tag A, tag B), A < B → questions carrying both, counted from Posts.xml independently."""
    pairs: Counter[tuple[str, str]] = Counter()
    for row in ET.parse(cardano_dir / "Posts.xml").getroot():
        if row.get("PostTypeId") == "1":
            tags = sorted({t for t in row.get("Tags", "").strip("|<>").replace("><", "|").split("|") if t})
            pairs.update(itertools.combinations(tags, 2))
    return pairs


def test_store_is_built_once_from_the_site_files(tagwiki_settings, tagwiki):
    stats = json.loads((tagwiki.path / "stats.json").read_text())
    tags = ET.parse(Path(tagwiki_settings.kg_dir) / "Tags.xml").getroot()
    assert stats["tags"] == len(tags) == 224
    assert stats["excerpts"] == 40  # 43 excerpt posts, three of them empty
    assert stats["bodies"] == 13 and stats["synonyms"] == 0  # the sample has no TagSynonyms.xml
    stamp = (tagwiki.path / "stats.json").stat().st_mtime_ns
    assert build_tagwiki_store(tagwiki_settings) == tagwiki.path
    assert (tagwiki.path / "stats.json").stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert tagwiki.label(_node("daedalus")) == "daedalus"


def test_tags_link_by_name_and_by_name_with_spaces(tagwiki):
    links = tagwiki.link(["Daedalus", "stake pool", "stake-pool", "cardano-node", "no such tag"])
    assert links == {
        "daedalus": [_node("daedalus")],
        "stake pool": [_node("stake-pool")],
        "stake-pool": [_node("stake-pool")],
        "cardano-node": [_node("cardano-node")],
    }


def test_facts_are_the_excerpt_sentences_mentions_and_most_shared_tags(tagwiki, cardano_dir):
    facts = tagwiki.one_hop([_node("daedalus")])
    by_relation: dict[str, set[str]] = {}
    for fact in facts:
        by_relation.setdefault(fact.relation_label, set()).add(fact.tail_label)
    assert by_relation["is described as"] == {DAEDALUS_EXCERPT}
    assert {"yoroi", "wallet", "ada"} <= by_relation["is described with reference to"]  # named in its wiki
    shared = _shared_questions(cardano_dir)
    partners = sorted(
        (-count, b if a == "daedalus" else a)
        for (a, b), count in shared.items()
        if "daedalus" in (a, b) and count >= 2
    )
    expected = {tag for _, tag in partners[:PARTNERS_PER_TAG]}
    assert by_relation["is often asked about together with"] == expected
    assert {"wallet", "yoroi", "cardano-cli"} <= expected and shared[("daedalus", "yoroi")] == 6


def test_the_tagwiki_backend_is_selected_by_the_config(tagwiki_settings):
    kg = build_knowledge_graph(tagwiki_settings)
    assert isinstance(kg, TagWikiKnowledgeGraph) and kg.name == "kg:tagwiki"
    gazetteer = build_gazetteer(tagwiki_settings, kg)
    gazetteer.resolve(["stake pool", "yoroi", "not a tag"])
    assert gazetteer.maps["software"] == {"stake pool": "stake-pool", "yoroi": "yoroi"}


def test_enhancement_adds_site_facts_whose_tails_are_in_the_context(tagwiki_settings, llama_tokenizer):
    enhancer = build_enhancer(tagwiki_settings, build_token_counter(llama_tokenizer))
    pair = QAPair(
        "Moving ADA from Daedalus to Yoroi\n\nCan I restore my Daedalus wallet in Yoroi?",
        "Yes: restore the wallet in Yoroi with the recovery phrase you wrote down for Daedalus.",
        1,
    )
    context = enhancer.enhance("Which wallet should I use?", [pair])
    kg_sentences = [s for s in context.sentences if s.source == "kg:tagwiki"]
    texts = {s.text for s in kg_sentences}
    # "Daedalus" is also an English word (WordNet), so prose written so is not a mention of the tag.
    assert {
        "yoroi is often asked about together with wallet.",
        "wallet is described with reference to yoroi.",
    } <= texts
    c_text = f"{pair.question} {pair.answer}".lower()
    for sentence in kg_sentences:  # τ': every tail is in the context
        assert sentence.triplet.tail.replace("-", " ") in c_text
        assert sentence.triplet.relation != "is described as"  # a sentence tail is never in Ent(C)


def test_its_ntriples_load_alongside_the_local_store(tagwiki_settings, tmp_path):
    from graphctx.knowledge.store import build_store

    alongside = KnowledgeSettings(kg_dir="", ntriples=[str(tagwiki_ntriples(tagwiki_settings))])
    alongside.cache_dir = str(tmp_path)
    kg = LocalKnowledgeGraph(build_store(alongside))
    links = kg.link(["yoroi"])
    assert links == {"yoroi": [_node("yoroi")]}
    assert "daedalus" in {f.tail_label for f in kg.one_hop(links["yoroi"])}


def _site(folder: Path, tags: str, posts: str, synonyms: str | None = None) -> Path:
    folder.mkdir()
    (folder / "Tags.xml").write_text(f"<tags>{tags}</tags>")
    (folder / "Posts.xml").write_text(f"<posts>{posts}</posts>")
    if synonyms is not None:
        (folder / "TagSynonyms.xml").write_text(f"<tagsynonyms>{synonyms}</tagsynonyms>")
    return folder


def test_synonyms_link_to_their_target_tag(tmp_path):
    questions = "".join(
        f'<row Id="{i}" PostTypeId="1" Tags="|plutus|haskell|" Title="q" Body="b" />' for i in (1, 2)
    )
    site = _site(
        tmp_path / "site",
        '<row Id="1" TagName="plutus" ExcerptPostId="9" /><row Id="2" TagName="haskell" />',
        questions + '<row Id="9" PostTypeId="4" Body="The smart contract language. Based on haskell." />',
        '<row Id="1" SourceTagName="plutus-core" TargetTagName="plutus" />',
    )
    settings = KnowledgeSettings(backend="tagwiki", kg_dir=str(site), cache_dir=str(tmp_path / "cache"))
    kg = TagWikiKnowledgeGraph.from_settings(settings)
    plutus = tag_node("site", "plutus")
    assert kg.link(["plutus core", "Plutus-Core"]) == {"plutus core": [plutus], "plutus-core": [plutus]}
    facts = {(f.relation_label, f.tail_label) for f in kg.one_hop([plutus])}
    assert facts == {
        ("instance of", "Stack Exchange tag"),
        ("is described as", "The smart contract language."),
        ("is described as", "Based on haskell."),
        ("is described with reference to", "haskell"),
        ("is often asked about together with", "haskell"),
    }
    assert json.loads((kg.path / "stats.json").read_text())["synonyms"] == 1


def test_bad_sites_are_one_line_naming_the_setting_or_file(tmp_path):
    with pytest.raises(ConfigError, match=r"^knowledge\.kg_dir: .* is not a folder"):
        build_tagwiki_store(KnowledgeSettings(backend="tagwiki", kg_dir=str(tmp_path / "none")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"^knowledge\.kg_dir: .*empty lacks Tags\.xml and Posts\.xml"):
        build_tagwiki_store(KnowledgeSettings(backend="tagwiki", kg_dir=str(tmp_path / "empty")))
    broken = _site(tmp_path / "broken", '<row Id="1" TagName="a"', "")
    with pytest.raises(DataError, match=r"Tags\.xml: malformed XML"):
        build_tagwiki_store(
            KnowledgeSettings(backend="tagwiki", kg_dir=str(broken), cache_dir=str(tmp_path / "c"))
        )
    assert not (tmp_path / "c" / "tagwiki-store").exists() or not any(
        (tmp_path / "c" / "tagwiki-store").iterdir()
    )


PLUGIN = '''
import pyoxigraph

from graphctx.knowledge.backends import Node, PluginSource, Triple

LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
ALIAS = "http://www.w3.org/2004/02/skos/core#altLabel"
CLAIM = "http://wikiba.se/ontology#directClaim"


class OwnTriples(PluginSource):
    """A knowledge graph read from one N-Triples file of the user's: its labelled edges as plain triples."""

    name = "own_triples"

    def __init__(self, settings, path: str):
        super().__init__(settings)
        self.path = path

    def location(self):
        return self.path

    def triples(self):
        quads = list(pyoxigraph.parse(path=self.path, format=pyoxigraph.RdfFormat.N_TRIPLES))
        labels = {q.subject.value: q.object.value for q in quads if q.predicate.value == LABEL}
        aliases = {}
        for q in quads:
            if q.predicate.value == ALIAS:
                aliases.setdefault(q.subject.value, []).append(q.object.value)
        relations = {q.object.value: q.subject.value for q in quads if q.predicate.value == CLAIM}

        def node(iri):
            return Node(iri, labels[iri], tuple(aliases.get(iri, ())))

        for q in quads:
            prop = relations.get(q.predicate.value)
            if prop and q.subject.value in labels and q.object.value in labels:
                yield Triple(node(q.subject.value), node(prop), node(q.object.value))
'''


def test_a_plugin_knowledge_source_is_selected_by_name_and_fingerprinted(
    tagwiki_settings, tmp_path, monkeypatch
):
    from graphctx.evaluation.matrix.resume_guard import ResumeGuard
    from graphctx.pipeline.config_file import load_config
    from graphctx.prompts import VARIANTS
    from graphctx.stack.model_stack import ModelStack
    from graphctx.stack.report import plan_text

    (tmp_path / "ownkg.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    triples = str(tagwiki_ntriples(tagwiki_settings))
    extra = f'[{{"class_path": "ownkg.OwnTriples", "init_args": {{"path": "{triples}"}}}}]'
    tiny = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"
    overrides = ["--knowledge.backend", "own_triples", "--knowledge.extra", extra]
    overrides += ["--cache_dir", str(tmp_path / "cache")]
    config = load_config(tiny, overrides)
    kg = build_knowledge_graph(config.knowledge)
    assert "daedalus" in {f.tail_label for f in kg.one_hop(kg.link(["yoroi"])["yoroi"])}
    text = plan_text(ModelStack(config))
    assert f"  knowledge    own_triples {triples};" in text
    assert "  extension    knowledge.own_triples: ownkg.OwnTriples (a plug-in, beyond the paper)" in text
    parts = ResumeGuard(config, None, None).prediction_fingerprint(VARIANTS["Base-GraphContextGen"])
    assert parts["knowledge_source"]["class_path"] == "ownkg.OwnTriples" and "extra" not in parts["knowledge"]
    with pytest.raises(
        ConfigError, match=r"^[^\n]*knowledge.backend: unknown backend 'own'; choose from \['local'"
    ):
        load_config(tiny, ["--knowledge.backend", "own"])


def test_sources_alongside_the_backend_each_name_their_facts(
    tagwiki_settings, tmp_path, monkeypatch, llama_tokenizer
):
    """``knowledge.also``: a second source's facts join the backend's, each sentence naming the source that
    gave it, with labels linked through both; the cache key, plan and fingerprint name every source."""
    from graphctx.evaluation.matrix.resume_guard import ResumeGuard
    from graphctx.knowledge.budget import TokenCounter
    from graphctx.pipeline.config_file import load_config
    from graphctx.pipeline.contexts import ContextBuilder
    from graphctx.prompts import VARIANTS
    from graphctx.retrieval.settings import RetrievalSettings
    from graphctx.stack.model_stack import ModelStack
    from graphctx.stack.report import plan_json, plan_text

    questions = "".join(
        f'<row Id="{i}" PostTypeId="1" Tags="|{tag}|haskell|" Title="q" Body="b" />'
        for i, tag in enumerate(["plutus", "plutus", "zzlang", "zzlang"])
    )
    tags = "".join(f'<row Id="{i}" TagName="{t}" />' for i, t in enumerate(["plutus", "haskell", "zzlang"]))
    other = _site(tmp_path / "plutus", tags, questions)
    other_settings = KnowledgeSettings(backend="tagwiki", kg_dir=str(other), cache_dir=str(tmp_path / "c"))
    (tmp_path / "ownkg.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    extra = [{"class_path": "ownkg.OwnTriples", "init_args": {"path": str(tagwiki_ntriples(other_settings))}}]
    both = KnowledgeSettings(**{**vars(tagwiki_settings), "also": ["own_triples"], "extra": extra})
    words = TokenCounter("words", str.split)
    enhancer = build_enhancer(both, words)
    pair = QAPair(
        "Yoroi or Daedalus for Plutus?", "Yoroi is a light wallet; Plutus and Zzlang are Haskell.", 1
    )
    context = enhancer.enhance("Which wallet?", [pair])
    sources = {s.text: s.triplet.source for s in context.sentences if s.triplet.source.startswith("kg:")}
    assert sources["yoroi is often asked about together with wallet."] == "kg:tagwiki"
    assert sources["zzlang is often asked about together with haskell."] == "kg:own_triples"  # its name
    assert sources["plutus is often asked about together with haskell."] == "kg:tagwiki+kg:own_triples"
    requests = [kg.stats.sparql_requests for kg in enhancer.kgs]
    builder = ContextBuilder(
        [], RetrievalSettings(device="cpu"), both, enhancer=enhancer, tokenizer=llama_tokenizer
    )
    assert (
        min(requests) > 0 and f"KG: {sum(requests)} requests," in builder.knowledge_summary()
    )  # every source
    alone = build_enhancer(tagwiki_settings, words)
    assert alone._cache_file("q", [pair]) != enhancer._cache_file("q", [pair])
    assert not any("zzlang" in s.text for s in alone.enhance("Which wallet?", [pair]).sentences)

    tiny = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"
    overrides = ["--knowledge.also", "[own_triples]", "--knowledge.extra", json.dumps(extra)]
    config = load_config(tiny, [*overrides, "--cache_dir", str(tmp_path / "cache")])
    text = plan_text(ModelStack(config))
    assert f"  knowledge    local ../shared/data/kg + own_triples {extra[0]['init_args']['path']};" in text
    assert "  extension    knowledge.also: KG facts also from own_triples, each naming its source" in text
    assert plan_json(ModelStack(config))["knowledge"]["also"][0]["name"] == "own_triples"
    parts = ResumeGuard(config, None, None).prediction_fingerprint(VARIANTS["Base-GraphContextGen"])
    assert parts["knowledge"]["also"] == ["own_triples"] and "tagwiki_dir" not in parts["knowledge"]
    assert parts["also_sources"]["own_triples"]["class_path"] == "ownkg.OwnTriples"
    with pytest.raises(ConfigError, match=r"knowledge\.also: unknown backend \['nope'\]; choose from"):
        load_config(tiny, ["--knowledge.also", "[nope]"])
    with pytest.raises(ConfigError, match=r"knowledge\.also: \['local'\]: each source once"):
        load_config(tiny, ["--knowledge.also", "[local]"])


SILENT = '''
from graphctx.knowledge.backends import Node, PluginSource, Triple


class Unheard(PluginSource):
    """Facts about things no question mentions."""

    name = "unheard"

    def triples(self):
        yield Triple(Node("zq1", "Zorblax"), Node("r", "runs on"), Node("zq2", "Quuxium"))
'''


def test_a_plugin_source_whose_facts_reach_no_context_says_so(
    tagwiki_settings, tmp_path, monkeypatch, llama_tokenizer
):
    """A source whose labels link no mention gives no fact to any context of a run: the run says so in one
    warning line naming it (it used to be silent); a source whose facts reach a context is not named."""
    from graphctx.knowledge.budget import TokenCounter
    from graphctx.pipeline.contexts import ContextBuilder
    from graphctx.retrieval.settings import RetrievalSettings

    (tmp_path / "silentkg.py").write_text(SILENT)
    (tmp_path / "ownkg.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    extra = [
        {"class_path": "silentkg.Unheard"},
        {"class_path": "ownkg.OwnTriples", "init_args": {"path": str(tagwiki_ntriples(tagwiki_settings))}},
    ]
    both = KnowledgeSettings(**{**vars(tagwiki_settings), "also": ["unheard", "own_triples"], "extra": extra})
    words = TokenCounter("words", str.split)
    enhancer = build_enhancer(both, words)
    builder = ContextBuilder(
        [], RetrievalSettings(device="cpu"), both, enhancer=enhancer, tokenizer=llama_tokenizer
    )
    pair = QAPair("Yoroi or Daedalus for Plutus?", "Yoroi is a light wallet; Plutus is Haskell.", 1)
    assert builder.silent_sources() == []  # nothing enhanced yet
    builder.enhance(["Which wallet?", "Which language?"], [[pair], [pair]])
    assert builder.facts_by_source["kg:own_triples"] > 0
    assert builder.silent_sources() == [
        "warning: knowledge source unheard (silentkg.Unheard) gave no fact to any of the 2 enhanced "
        "questions: no mention linked to its labels or aliases, or none of its facts reached another entity "
        "of a context"
    ]
