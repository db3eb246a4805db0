"""The triplet-extractor registry: the built-ins are its entries, a plug-in extractor from the user's own
package is named in ``knowledge.extractors`` like a built-in and drives enhancement on the tiny data (its
entities alone are linked to the site's tag wiki), with its own plan lines and fingerprints; an unknown
name is one line naming the setting."""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from graphctx.data.html import html_to_text
from graphctx.errors import ConfigError
from graphctx.knowledge.budget import QAPair, TokenCounter
from graphctx.knowledge.enhance import build_enhancer
from graphctx.knowledge.extractors import BUILT_IN, extractor_entries, selected_extractors
from graphctx.knowledge.settings import EXTRACTORS, KnowledgeSettings
from graphctx.pipeline.config_file import load_config

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"

PLUGIN = '''
import re

from graphctx.knowledge.extractors import PluginExtractor
from graphctx.knowledge.triplets import Triplet


class TagPairs:
    """(A, "is mentioned with", B) for each two neighbouring tags, in name order, that a text names."""

    def __init__(self, tags, name):
        self.tags = set(tags)
        self.name = name

    def extract(self, texts):
        found = [sorted(self.tags & set(re.findall(r"[a-z][a-z0-9-]+", text.lower()))) for text in texts]
        return [[Triplet(a, "is mentioned with", b, self.name) for a, b in zip(f, f[1:])] for f in found]


class TagPairsEntry(PluginExtractor):
    name = "tag_pairs"

    def __init__(self, settings, tags):
        super().__init__(settings)
        self.tags = tags

    def build(self, lent):
        return TagPairs(self.tags, self.name)
'''

TAGS = ["daedalus", "yoroi", "wallet"]
WORDS = TokenCounter("words", str.split)


def wallet_pairs(cardano_dir: Path) -> list[QAPair]:
    """The first two answered questions of the cardano dump naming both Daedalus and Yoroi."""
    posts = {row.get("Id"): row.attrib for row in ET.parse(cardano_dir / "Posts.xml").getroot()}
    pairs = []
    for post in posts.values():
        answer = posts.get(post.get("AcceptedAnswerId", ""))
        question = f"{post.get('Title')}\n\n{html_to_text(post['Body'])}"
        if answer is not None and {"daedalus", "yoroi"} <= set(question.lower().split()):
            pairs.append(QAPair(question, html_to_text(answer["Body"]), int(post["Id"])))
    assert len(pairs) >= 2, "the cardano dump has answered questions naming both wallets"
    return pairs[:2]


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``knowledge.extractors_extra`` naming ``ownext.TagPairsEntry``, written to a folder on sys.path."""
    (tmp_path / "ownext.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return json.dumps([{"class_path": "ownext.TagPairsEntry", "init_args": {"tags": TAGS}}])


def test_the_built_ins_are_the_registry_entries():
    assert tuple(cls.name for cls in BUILT_IN) == EXTRACTORS
    settings = KnowledgeSettings(extractors=["llm", "spacy"])
    assert [entry.name for entry in selected_extractors(settings)] == ["llm", "spacy"]
    assert list(extractor_entries(settings)) == list(EXTRACTORS)


def test_a_plugin_extractor_drives_enhancement_on_the_tiny_data(plugin, tmp_path, cardano_dir):
    from graphctx.evaluation.matrix.resume_guard import ResumeGuard
    from graphctx.prompts import VARIANTS
    from graphctx.stack.model_stack import ModelStack
    from graphctx.stack.report import plan_json, plan_text

    overrides = ["--knowledge.extractors", '["tag_pairs"]', "--knowledge.extractors_extra", plugin]
    overrides += ["--knowledge.backend", "tagwiki", "--knowledge.kg_dir", str(cardano_dir)]
    overrides += ["--knowledge.link_mentions", "false", "--knowledge.token_budget", "100000"]
    overrides += ["--cache_dir", str(tmp_path / "cache")]
    config = load_config(TINY, overrides)
    enhancer = build_enhancer(config.knowledge, WORDS)
    pairs = wallet_pairs(cardano_dir)
    context = enhancer.enhance("Which wallet should I use?", pairs)
    extracted = [t for t in context.triplets if t.source.startswith("tag_pairs@pair=")]
    assert ("daedalus", "is mentioned with", "wallet") in {(t.head, t.relation, t.tail) for t in extracted}
    kg = [s for s in context.sentences if s.triplet.source == "kg:tagwiki"]
    entities = {name for t in extracted for name in (t.head, t.tail)}
    assert kg and all({s.triplet.head, s.triplet.tail} <= entities for s in kg)  # linked from its triplets
    assert "yoroi is often asked about together with daedalus." in {s.text for s in kg}

    stack = ModelStack(config)
    text = plan_text(stack)
    assert "  extractors   tag_pairs   STAND-IN" in text
    extension = "knowledge.extractors.tag_pairs: ownext.TagPairsEntry (a plug-in, beyond the paper)"
    assert f"  extension    {extension}" in text
    extractors = plan_json(stack)["knowledge"]["extractors"]
    assert extractors == [{"name": "tag_pairs", "paper": False, "class_path": "ownext.TagPairsEntry"}]
    parts = ResumeGuard(config, None, None).prediction_fingerprint(VARIANTS["Base-GraphContextGen"])
    assert parts["extractor_plugins"]["tag_pairs"]["init_args"] == {"tags": TAGS}
    assert "extractors_extra" not in parts["knowledge"]
    other = load_config(TINY, [*overrides[:3], plugin.replace('"wallet"', '"ada"'), *overrides[4:]])
    assert selected_extractors(other.knowledge)[0].tags == ["daedalus", "yoroi", "ada"]
    again = build_enhancer(other.knowledge, WORDS)
    assert again._cache_file("q", pairs) != enhancer._cache_file("q", pairs)  # its arguments are in the key


def test_an_unknown_extractor_is_one_line_naming_the_setting(plugin, tmp_path):
    with pytest.raises(ConfigError, match=r"knowledge\.extractors: unknown \['nope'\]") as error:
        load_config(TINY, ["--knowledge.extractors", '["nope"]'])
    assert "\n" not in str(error.value)
    overrides = ["--knowledge.extractors", '["spacy", "nope"]', "--knowledge.extractors_extra", plugin]
    choices = re.escape(
        repr([*(cls.name for cls in BUILT_IN), "tag_pairs"])
    )  # the built-ins, then the plug-in
    expected = rf"knowledge\.extractors: unknown extractor\(s\) \['nope'\]; choose from {choices}$"
    with pytest.raises(ConfigError, match=expected) as error:
        load_config(TINY, overrides)
    assert str(error.value).startswith(f"{TINY}: ") and "\n" not in str(error.value)
    (tmp_path / "ownext_taken.py").write_text(
        "from ownext import TagPairsEntry\n\n\nclass Taken(TagPairsEntry):\n    name = 'spacy'\n"
    )
    taken = plugin.replace("ownext.TagPairsEntry", "ownext_taken.Taken")
    with pytest.raises(ConfigError, match=r"knowledge\.extractors_extra\[0\]: name 'spacy' .* is taken"):
        load_config(TINY, ["--knowledge.extractors_extra", taken])


@pytest.mark.parametrize(
    ("extract", "problem"),
    [
        ("[[]]", "extract() gave 1 triplet lists for 2 texts"),
        (
            "[[('a', 'b', 'c')], []]",
            "extract()'s list 0 holds ('a', 'b', 'c'), not a graphctx.knowledge.triplets",
        ),
        ("[None, []]", "extract()'s list 0 is a NoneType"),
        ("[][0]", "raised IndexError: list index out of range"),
    ],
)
def test_a_plugin_extractors_wrong_output_is_one_line_naming_it(tmp_path, monkeypatch, extract, problem):
    from graphctx.knowledge.extractors import build_extractor

    (tmp_path / "badext.py").write_text(
        "from graphctx.knowledge.extractors import PluginExtractor\n\n"
        "class Bad:\n    name = 'bad'\n\n    def extract(self, texts):\n"
        f"        return {extract}\n\n"
        "class BadEntry(PluginExtractor):\n    name = 'bad'\n\n"
        "    def build(self, lent):\n        return Bad()\n"
    )
    monkeypatch.delitem(sys.modules, "badext", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    extra = json.dumps([{"class_path": "badext.BadEntry"}])
    config = load_config(TINY, ["--knowledge.extractors", '["bad"]', "--knowledge.extractors_extra", extra])
    with pytest.raises(ConfigError) as error:
        build_extractor(config.knowledge).extract(["one text", "another"])
    assert str(error.value).startswith(f"knowledge.extractors_extra bad (badext.BadEntry): {problem}")


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("return []", "triples() gave no triples; a knowledge source needs at least one fact"),
        ("yield ('a', 'b', 'c')", "triples() gave tuple, not a Triple(head, relation, tail)"),
        (
            "yield Triple(Node('a', 'A'), 'is', Node('b', 'B'))",
            "a triple's relation is str, not a Node(id, label)",
        ),
        (
            "yield Triple(Node('a', ''), Node('r', 'R'), Node('b', 'B'))",
            "a triple's head Node(id='a', label='', aliases=()) has an empty",
        ),
        (
            "yield Triple(Node('a', 'A', 'ay'), Node('r', 'R'), Node('b', 'B'))",
            "a triple's head Node(id='a', label='A', aliases='ay'): aliases is not a tuple of names",
        ),
        ("raise OSError('no such file')", "raised OSError: no such file"),
    ],
)
def test_a_plugin_knowledge_source_without_good_triples_is_one_line_naming_it(
    tmp_path, monkeypatch, body, problem
):
    """A source that gives nothing (or not triples) fails when its store is built, not silently later."""
    from graphctx.knowledge.backends import build_knowledge_graph

    (tmp_path / "badkg.py").write_text(
        "from graphctx.knowledge.backends import Node, PluginSource, Triple\n\n"
        f"class Bad(PluginSource):\n    name = 'mine'\n\n    def triples(self):\n        {body}\n"
    )
    monkeypatch.delitem(sys.modules, "badkg", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    extra = json.dumps([{"class_path": "badkg.Bad"}])
    overrides = [
        "--knowledge.extra",
        extra,
        "--knowledge.backend",
        "mine",
        "--cache_dir",
        str(tmp_path / "c"),
    ]
    config = load_config(TINY, overrides)
    with pytest.raises(ConfigError) as error:
        build_knowledge_graph(config.knowledge)
    assert str(error.value).startswith(f"knowledge.extra mine (badkg.Bad): {problem}"), str(error.value)
    assert "\n" not in str(error.value)


def test_a_plugin_knowledge_source_may_not_open_its_own_graph(tmp_path, monkeypatch):
    (tmp_path / "ownopen.py").write_text(
        "from graphctx.knowledge.backends import PluginSource\n\n"
        "class Opens(PluginSource):\n    name = 'mine'\n\n    def open(self):\n        return {}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"Opens overrides open\(\) or gazetteer\(\): a plug-in knowledge"):
        load_config(TINY, ["--knowledge.extra", json.dumps([{"class_path": "ownopen.Opens"}])])
