"""The local KG store built from ../shared/data/kg, one-hop facts, τ', and end-to-end enhancement."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from graphctx.data.html import html_to_text
from graphctx.errors import ConfigError, DataError
from graphctx.knowledge.budget import QAPair, build_token_counter
from graphctx.knowledge.enhance import Enhancer, build_enhancer, filter_one_hop
from graphctx.knowledge.entities import EntitySet
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.sparql import KGFact
from graphctx.knowledge.store import DEBIAN, WD, LocalKnowledgeGraph, build_store

DOCKER, LINUX, NGINX = WD + "Q15206305", WD + "Q388", WD + "Q306144"


@pytest.fixture(scope="session")
def local_kg(kg_settings: KnowledgeSettings) -> LocalKnowledgeGraph:
    return LocalKnowledgeGraph.from_settings(kg_settings)


@pytest.fixture(scope="session")
def enhancer(kg_settings: KnowledgeSettings, local_kg: LocalKnowledgeGraph, llama_tokenizer) -> Enhancer:
    return build_enhancer(kg_settings, build_token_counter(llama_tokenizer))


@pytest.fixture(scope="session")
def cardano_pairs(cardano_dir: Path) -> dict[int, QAPair]:
    rows = {r.get("Id"): r.attrib for r in ET.parse(cardano_dir / "Posts.xml").getroot()}
    pairs = {}
    for post in rows.values():
        answer = rows.get(post.get("AcceptedAnswerId", ""))
        if post.get("PostTypeId") == "1" and answer is not None:
            question = f"{post['Title']}\n\n{html_to_text(post['Body'])}"
            pairs[int(post["Id"])] = QAPair(question, html_to_text(answer["Body"]), int(post["Id"]))
    return pairs


@pytest.mark.slow
def test_store_is_built_once_from_both_sources(
    kg_settings: KnowledgeSettings, local_kg: LocalKnowledgeGraph
) -> None:
    stats = json.loads((local_kg.path / "stats.json").read_text())
    assert stats["triples"] > 400_000  # 63,681 packages and 658 software entities with their facts
    stamp = (local_kg.path / "stats.json").stat().st_mtime_ns
    assert build_store(kg_settings) == local_kg.path
    assert (local_kg.path / "stats.json").stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert not [p for p in local_kg.path.parent.iterdir() if p.name.endswith(".tmp")]
    assert local_kg.label(NGINX) == "Nginx"
    assert local_kg.label(DEBIAN + "cabal-install") == "cabal-install"


def test_linking_by_label_alias_and_normalised_form(local_kg: LocalKnowledgeGraph) -> None:
    links = local_kg.link(["Postgres", "nginx", "DOCKER", "libsodium-dev", "no such software at all"])
    assert links["postgres"] == [WD + "Q192490"]  # a mention of PostgreSQL in the SQL dump
    assert set(links["nginx"]) == {NGINX, DEBIAN + "nginx"}  # the software and the Debian package
    assert DOCKER in links["docker"]
    assert links["libsodium-dev"] == [DEBIAN + "libsodium-dev"]
    assert "no such software at all" not in links


def test_one_hop_returns_the_labelled_edges_of_the_sources(local_kg: LocalKnowledgeGraph) -> None:
    facts = {
        (f.head_label, f.relation_label, f.tail_label) for f in local_kg.one_hop([DOCKER, DEBIAN + "nginx"])
    }
    # software_entities.sql: Docker is related to the OSs Linux, macOS, Windows; entity type Runtime
    assert ("Docker", "operating system", "Linux") in facts
    assert ("Docker", "instance of", "runtime environment") in facts
    # debian_bookworm_packages.jsonl.gz: nginx Depends libssl3 (>= 3.0.0), ... iproute2; Provides httpd
    assert ("nginx", "depends on software", "libssl3") in facts
    assert ("nginx", "depends on software", "iproute2") in facts
    assert ("nginx", "provides", "httpd") in facts
    assert ("nginx", "Debian section", "httpd") in facts
    assert all(head in {"Docker", "nginx"} for head, _, _ in facts)  # one hop: edges leaving the sources only
    assert local_kg.one_hop([]) == []


def test_tau_prime_keeps_only_tails_in_the_entity_set() -> None:
    facts = [
        KGFact(DOCKER, "Docker", "p", "operating system", LINUX, "Linux"),
        KGFact(DOCKER, "Docker", "p", "operating system", WD + "Q14116", "macOS"),
        KGFact(DOCKER, "Docker", "p", "instance of", "urn:t", "runtime environment"),
        KGFact(DEBIAN + "nginx", "nginx", "p", "depends on software", DEBIAN + "libssl3", "libssl3"),
        KGFact(DOCKER, "Docker", "p", "same as", DOCKER, "Docker"),
    ]
    entities = EntitySet.from_surfaces(
        ["Docker", "linux", "nginx", "LibSSL3"], {"docker": [DOCKER], "linux": [LINUX]}
    )
    kept = filter_one_hop(facts, entities)
    assert [f.tail_label for f in kept] == [
        "Linux",
        "libssl3",
    ]  # by id, then by normalised label; no self-loop


def test_store_from_user_ntriples(tmp_path: Path) -> None:
    subset = tmp_path / "wikidata-software.nt"
    subset.write_text(
        f"<{WD}Q5> <http://www.wikidata.org/prop/direct/P178> <{WD}Q6> .\n"
        f'<{WD}Q5> <http://www.w3.org/2000/01/rdf-schema#label> "Cardano node"@en .\n'
        f'<{WD}Q6> <http://www.w3.org/2000/01/rdf-schema#label> "Input Output"@en .\n'
        f'<{WD}P178> <http://www.w3.org/2000/01/rdf-schema#label> "developer"@en .\n'
    )
    settings = KnowledgeSettings(kg_dir="", ntriples=[str(subset)], cache_dir=str(tmp_path / "c"))
    kg = LocalKnowledgeGraph.from_settings(settings)
    node = kg.link(["cardano node"])["cardano node"]
    assert node == [WD + "Q5"]
    [fact] = kg.one_hop(node)
    assert (fact.head_label, fact.relation_label, fact.tail_label) == (
        "Cardano node",
        "developer",
        "Input Output",
    )
    bad = tmp_path / "bad.nt"
    bad.write_text("<not an n-triples line\n")
    with pytest.raises(ConfigError, match=r"knowledge\.kg_dir: empty .* the local KG has no source"):
        build_store(KnowledgeSettings(kg_dir="", cache_dir=str(tmp_path / "e")))
    with pytest.raises(DataError, match=r"knowledge\.ntriples: .*bad\.nt"):
        build_store(KnowledgeSettings(kg_dir="", ntriples=[str(bad)], cache_dir=str(tmp_path / "d")))


def test_enhancement_of_real_cardano_questions(
    enhancer: Enhancer, cardano_pairs: dict[int, QAPair], local_kg: LocalKnowledgeGraph
) -> None:
    # 2433 "Decentralizing an entire website with Cardano?" (nginx, PostgreSQL, Docker) and
    # 3849 "In experience, what distro of Linux is ideal for SPO" retrieved for a cardano-node/Linux question
    linux_pairs = [cardano_pairs[2433], cardano_pairs[3849]]
    # 4424 (Plutus build error; hlint, ghc) and 261 (Plutus Pioneer Program lecture 1: cabal build)
    ghc_pairs = [cardano_pairs[4424], cardano_pairs[261]]
    contexts = enhancer.enhance_batch(
        ["Can I run cardano-node behind nginx with Docker on Linux?", "Which ghc do I need for cabal build?"],
        [linux_pairs, ghc_pairs],
    )
    kg_sentences = [[s.text for s in c.sentences if s.source == "kg:local"] for c in contexts]
    assert {"Docker runs on Linux.", "PostgreSQL runs on Linux.", "Nginx runs on Linux."} <= set(
        kg_sentences[0]
    )
    assert "cabal-install depends on ghc." in kg_sentences[1]
    for context, pairs in zip(contexts, [linux_pairs, ghc_pairs], strict=True):
        c_text = " ".join(f"{p.question} {p.answer}" for p in pairs).lower()
        assert context.pairs == pairs and context.text.startswith("Question: ")
        for sentence in context.sentences:
            assert sentence.triplet in context.triplets and context.text.count(sentence.text) >= 1
            if sentence.source == "kg:local":  # a real one-hop fact whose tail is mentioned in C
                heads = local_kg.link([sentence.triplet.head])
                facts = local_kg.one_hop([i for ids in heads.values() for i in ids])
                assert any(f.tail_label == sentence.triplet.tail for f in facts)
                assert sentence.triplet.tail.lower() in c_text
            else:
                assert sentence.source.startswith("spacy@pair=")
    assert (
        enhancer.enhance(contexts and "Which ghc do I need for cabal build?", ghc_pairs) == contexts[1]
    )  # cached


def test_budget_and_disabled_enhancement(
    kg_settings: KnowledgeSettings, enhancer: Enhancer, cardano_pairs: dict[int, QAPair]
) -> None:
    from dataclasses import replace

    pairs = [cardano_pairs[2433], cardano_pairs[3849]]
    full = enhancer.enhance("docker on linux", pairs)
    small = Enhancer(
        replace(kg_settings, token_budget=enhancer.count_tokens(full.text) - 4),
        enhancer.extractor,
        enhancer.kg,
        enhancer.matcher,
        enhancer.count_tokens,
        None,
    ).enhance("docker on linux", pairs)
    assert small.pairs == pairs and len(small.sentences) < len(full.sentences)
    assert small.sentences == full.sentences[: len(small.sentences)]  # trimmed from the end, KG facts first
    off = Enhancer(
        replace(kg_settings, enabled=False),
        enhancer.extractor,
        enhancer.kg,
        enhancer.matcher,
        enhancer.count_tokens,
        None,
    ).enhance("docker on linux", pairs)
    assert off.sentences == [] and off.triplets == [] and "Knowledge:" not in off.text
