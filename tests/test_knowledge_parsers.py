"""Parsers and pure functions of graphctx.knowledge: REBEL output, LLM replies, normalisation, sentences."""

from __future__ import annotations

from graphctx.knowledge.budget import QAPair, build_token_counter, fit_budget, render
from graphctx.knowledge.entities import EntitySet, normalise_entity
from graphctx.knowledge.llm import parse_llm_triplets
from graphctx.knowledge.rebel import parse_rebel_output
from graphctx.knowledge.triplets import Triplet
from graphctx.knowledge.verbalise import readable_relation, verbalise

# Decoded output of Babelscape/rebel-large (special tokens kept) for the model card's example sentence
# "Punta Cana is a resort town in the municipality of Higuey, in La Altagracia Province, the eastern most
# province of the Dominican Republic".
REBEL_PUNTA_CANA = (
    "<s><triplet> Punta Cana <subj> La Altagracia Province <obj> located in the administrative territorial "
    "entity <subj> Dominican Republic <obj> country <triplet> Higuey <subj> La Altagracia Province <obj> "
    "located in the administrative territorial entity <subj> Dominican Republic <obj> country <triplet> La "
    "Altagracia Province <subj> province <obj> instance of <subj> Dominican Republic <obj> country <triplet> "
    "province <subj> Dominican Republic <obj> country <triplet> Dominican Republic <subj> La Altagracia "
    "Province <obj> contains administrative territorial entity</s>"
)


def test_rebel_parser_reads_every_triplet_of_real_output() -> None:
    triplets = parse_rebel_output(REBEL_PUNTA_CANA)
    assert triplets[:2] == [
        ("Punta Cana", "located in the administrative territorial entity", "La Altagracia Province"),
        ("Punta Cana", "country", "Dominican Republic"),
    ]
    assert ("La Altagracia Province", "instance of", "province") in triplets
    assert triplets[-1] == (
        "Dominican Republic",
        "contains administrative territorial entity",
        "La Altagracia Province",
    )
    assert len(triplets) == 8


def test_rebel_parser_handles_batch_padding_and_malformed_pieces() -> None:
    padded = "</s><s><triplet> Docker <subj> Linux <obj> operating system</s><pad><pad>"
    assert parse_rebel_output(padded) == [("Docker", "operating system", "Linux")]
    # tail without relation, relation without tail, <subj> before any head, empty head: all dropped
    malformed = (
        "<s><subj> orphan <obj> country <triplet> nginx <subj> libssl3 <triplet> <subj> x <obj> y "
        "<triplet> PostgreSQL <obj> developer <subj> <obj> license <subj> Linux <obj> operating system"
    )
    assert parse_rebel_output(malformed) == [("PostgreSQL", "operating system", "Linux")]
    assert parse_rebel_output("<s></s>") == []
    assert parse_rebel_output(REBEL_PUNTA_CANA + REBEL_PUNTA_CANA) == parse_rebel_output(REBEL_PUNTA_CANA)


def test_llm_parser_accepts_messy_replies() -> None:
    reply = """Sure! Here are the triplets:
1. (cardano-node | runs on | Linux)
2) cardano-cli; is part of; cardano-node
- "Daedalus" -> "is a" -> "wallet"
* (Plutus, is written in, Haskell)
Subject: nginx, Relation: depends on, Object: libssl3
This line is prose and has no triplet at all.
(a | b)
(cardano-node | runs on | Linux)
Text: another example the model invented
(should | not | appear)"""
    assert parse_llm_triplets(reply) == [
        ("cardano-node", "runs on", "Linux"),
        ("cardano-cli", "is part of", "cardano-node"),
        ("Daedalus", "is a", "wallet"),
        ("Plutus", "is written in", "Haskell"),
        ("nginx", "depends on", "libssl3"),
    ]


def test_llm_parser_reads_json_and_rejects_sentences() -> None:
    assert parse_llm_triplets(
        'Output: [["Docker", "runs on", "Linux"], {"subject": "jq", "predicate": '
        '"parses", "object": "JSON"}, ["too", "short"]]'
    ) == [
        ("Docker", "runs on", "Linux"),
        ("jq", "parses", "JSON"),
    ]
    long_part = "a very long explanation " * 10
    assert parse_llm_triplets(f"({long_part} | is | x)") == []
    assert parse_llm_triplets("I could not find any facts.") == []
    assert parse_llm_triplets("<triplet> ghc <subj> Haskell <obj> programming language") == [
        ("ghc", "programming language", "Haskell")
    ]


def test_normalise_entity_keeps_software_punctuation() -> None:
    assert normalise_entity("  The  Docker daemon. ") == "docker daemon"
    assert normalise_entity("`cardano-node`") == "cardano-node"
    assert normalise_entity("C++") == "c++"
    assert normalise_entity("Node.js,") == "node.js"
    assert normalise_entity("PostgreSQL") == normalise_entity("postgresql")


def test_entity_set_membership_by_id_or_label() -> None:
    entities = EntitySet.from_surfaces(
        ["Docker", "docker", "Linux", "nothing"], {"docker": ["wd:Q1"], "linux": ["wd:Q388"]}
    )
    assert len(entities) == 3
    assert entities.entities["docker"].surface == "Docker"
    assert [e.key for e in entities.linked()] == ["docker", "linux"]
    assert entities.contains("wd:Q388", "whatever")
    assert entities.contains("wd:Q999", "NOTHING")
    assert not entities.contains("wd:Q999", "Windows")


def test_verbalise_is_readable_deterministic_and_deduplicated() -> None:
    triplets = [
        Triplet(
            "Docker",
            readable_relation("http://www.wikidata.org/prop/direct/P306", "operating system"),
            "Linux",
            "kg:local",
        ),
        Triplet(
            "PostgreSQL",
            readable_relation("http://www.wikidata.org/entity/P31", "instance of"),
            "application",
            "kg:local",
        ),
        Triplet("docker", "runs on", "linux", "spacy@pair=0"),
        Triplet("nginx", "recommends", "ssl-cert", "kg:local"),
    ]
    sentences = verbalise(triplets)
    assert [s.text for s in sentences] == [
        "Docker runs on Linux.",
        "PostgreSQL is an application.",
        "nginx recommends ssl-cert.",
    ]
    assert sentences[0].source == "kg:local"
    assert verbalise(triplets) == sentences
    assert readable_relation("urn:graphctx:direct:unknown", "some label") == "some label"


def test_budget_trims_sentences_before_pairs_and_keeps_the_top_pair_whole(llama_tokenizer) -> None:
    count = build_token_counter(llama_tokenizer)
    assert count("cardano-node runs on Linux.") == len(
        llama_tokenizer("cardano-node runs on Linux.", add_special_tokens=False)["input_ids"]
    )
    pairs = [QAPair("q one", "answer " * 20, 1), QAPair("q two", "answer " * 20, 2)]
    sentences = verbalise([Triplet(f"e{i}", "runs on", "Linux", "kg:local") for i in range(10)])
    full = count(render(pairs, sentences))
    kept_pairs, kept = fit_budget(pairs, sentences, full, count)
    assert (kept_pairs, kept) == (pairs, sentences)
    kept_pairs, kept = fit_budget(pairs, sentences, full - 1, count)
    assert kept_pairs == pairs and kept == sentences[:9]
    kept_pairs, kept = fit_budget(pairs, sentences, count(render(pairs, [])) - 1, count)
    assert kept == [] and kept_pairs == pairs[:1]
    kept_pairs, kept = fit_budget(pairs, sentences, 10, count)  # the top pair alone is over: kept whole
    assert kept_pairs == pairs[:1] and kept == []
