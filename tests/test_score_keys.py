"""A metric's fingerprint holds what computes its scores and nothing else: every model it runs (a folder
by its files, a Hub id by its cached snapshot), its libraries' versions, and only the settings it reads."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import huggingface_hub.constants
import torch
from transformers import BertConfig, BertForTokenClassification

from graphctx.evaluation.matrix import metric_fingerprints as score_keys
from graphctx.evaluation.matrix.metric_fingerprints import metric_parts
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics import entry_defaults
from graphctx.metrics.registry import MetricContext, metric_entries
from graphctx.metrics.settings import BertScoreSettings, FactSettings, MetricSettings
from graphctx.model import ModelSpec
from graphctx.model_use import model_identity


def parts(facts: FactSettings, knowledge: KnowledgeSettings | None = None, **metrics) -> dict:
    settings = MetricSettings(facts=facts, **metrics)
    context = MetricContext(settings, knowledge or KnowledgeSettings(), ModelSpec())
    return metric_parts(metric_entries(context), settings)


def save_tiny_ner(folder: Path, seed: int) -> None:
    config = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=1)
    config.intermediate_size = 16
    torch.manual_seed(seed)
    BertForTokenClassification(config).save_pretrained(folder)


def test_replacing_a_scorers_model_folder_changes_only_its_metrics_key(tmp_path):
    ner = tmp_path / "ner"
    save_tiny_ner(ner, seed=0)
    facts = FactSettings(ner_model=str(ner), relation_model=str(tmp_path / "luke"))
    before = parts(facts)
    stamp = (ner / "model.safetensors").stat().st_mtime_ns
    shutil.rmtree(ner)
    save_tiny_ner(ner, seed=1)  # other weights, same file names and sizes
    for file in ner.iterdir():  # a later write, even where the file system's clock is coarse
        os.utime(file, ns=(stamp + 10**9, stamp + 10**9))
    after = parts(facts)
    assert before["fact_score"] != after["fact_score"]
    assert set(score_keys.changed(before["fact_score"], after["fact_score"])) == {
        "models.ner.config.json",
        "models.ner.model.safetensors",
    }
    assert before["entity_jaccard"] == after["entity_jaccard"]  # UniNER does not read FactSumm's NER


def test_knowledge_extractors_reach_only_the_triplet_fact_score(tmp_path):
    rebel = KnowledgeSettings(extractors=["rebel"])
    spacy = KnowledgeSettings(extractors=["spacy"])
    factsumm = FactSettings(fact_method="factsumm")
    assert parts(factsumm, rebel)["fact_score"] == parts(factsumm, spacy)["fact_score"]
    triplets = FactSettings(fact_method="triplets")
    assert parts(triplets, rebel)["fact_score"] != parts(triplets, spacy)["fact_score"]
    # and the entity types are the entity Jaccard's, not the fact score's
    other_types = dataclasses.replace(factsumm, entity_types=["software"])
    assert parts(factsumm)["fact_score"] == parts(other_types)["fact_score"]
    assert parts(factsumm)["entity_jaccard"] != parts(other_types)["entity_jaccard"]


def test_a_library_version_is_part_of_the_key(monkeypatch):
    before = parts(FactSettings())
    versions = {"pysbd": "0.3.4", "transformers": "9.9.9"}
    monkeypatch.setattr(entry_defaults, "_version", lambda package: versions.get(package, "1.0"))
    after = parts(FactSettings())
    assert after["fact_score"]["libraries"] == {"pysbd": "0.3.4", "torch": "1.0", "transformers": "9.9.9"}
    assert after["rouge"]["libraries"] == {"rouge-score": "1.0", "nltk": "1.0"}
    assert before["fact_score"] != after["fact_score"]


def test_a_hub_id_without_an_owner_is_known_by_its_cached_snapshot(tmp_path, monkeypatch):
    # roberta-large (BERTScore's encoder) has no "owner/" part: its snapshot commit is its identity
    commit = "8e65e2e02d5ce63d9e4ec42cc3d1e0df6a1b2e6a"
    snapshot = tmp_path / "models--roberta-large" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (tmp_path / "models--roberta-large" / "refs").mkdir()
    (tmp_path / "models--roberta-large" / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert model_identity("roberta-large") == {"id": "roberta-large", "commit": commit}
    key = parts(FactSettings(), bertscore=BertScoreSettings(model="roberta-large"))["bertscore"]
    assert key["model"] == {"id": "roberta-large", "commit": commit}
    assert model_identity("no-such-model") == {"id": "no-such-model", "commit": None}


def test_gold_values_go_to_the_default_cache_when_the_config_names_none(monkeypatch, tmp_path):
    from graphctx.evaluation.matrix.resume_guard import ResumeGuard
    from graphctx.pipeline.config_file import load_config

    monkeypatch.setenv("GRAPHCTX_CACHE", str(tmp_path / "default-cache"))
    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml")
    assert config.cache_dir is None
    folder = ResumeGuard(config, None, None).gold_folder("entity_jaccard")
    assert folder.parent == tmp_path / "default-cache" / "gold" and folder.name.startswith("entity_jaccard-")
