"""A model is the paper's by provenance (a reference Hub id, or a Hugging Face cache snapshot of one whose
config has that id's shape), never by shape alone: look-alikes of every reference architecture are
stand-ins, labelled in the plan; a folder with no provenance is a stand-in, never an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from transformers import BertConfig, LlamaConfig, T5Config

from graphctx.cli import main as cli_main
from graphctx.paper import AUTOAIS, EMBEDDING, GENERATION, UNINER, is_reference, provenance

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "tiny.yaml"
REVISION = "0123456789abcdef0123456789abcdef01234567"

BERT_LARGE = BertConfig(num_hidden_layers=24, hidden_size=1024, num_attention_heads=16)
T5_XXL = T5Config(num_layers=24, d_model=4096, num_heads=64, d_kv=64, d_ff=10240)
LLAMA_7B = LlamaConfig(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32)


def snapshot(root: Path, repo_id: str) -> Path:
    """The folder the HF cache keeps ``repo_id`` at one revision in."""
    folder = root / f"models--{repo_id.replace('/', '--')}" / "snapshots" / REVISION
    folder.mkdir(parents=True)
    return folder


def saved(config, folder: Path) -> str:
    config.save_pretrained(folder)  # the shape look-alikes: full-size configs, no weights needed to plan
    return str(folder)


@pytest.mark.parametrize(
    ("reference", "config", "look_alike"),
    [
        (EMBEDDING, BERT_LARGE, "bert-large-uncased"),
        (AUTOAIS, T5_XXL, "google/flan-t5-xxl"),
        (GENERATION, LLAMA_7B, "meta-llama/Llama-2-7b-chat-hf"),
        (GENERATION, LLAMA_7B, "codellama/CodeLlama-7b-hf"),
        (UNINER, LLAMA_7B, "lmsys/vicuna-7b-v1.5"),
    ],
    ids=["bert-large-as-bge", "flan-t5-xxl-as-true", "llama2-chat-as-llama2", "codellama", "vicuna"],
)
def test_a_look_alike_of_the_reference_shape_is_a_stand_in(tmp_path, reference, config, look_alike):
    plain = saved(config, tmp_path / "plain")  # a folder with the reference shape and no provenance
    cached = saved(config, snapshot(tmp_path / "hub", look_alike))  # its own id in the HF cache layout
    assert not is_reference(reference, plain)
    assert provenance(cached) == (look_alike, REVISION)
    assert not is_reference(reference, cached)
    assert not is_reference(reference, look_alike)  # the look-alike's Hub id
    real = saved(config, snapshot(tmp_path / "hub", reference.name))
    assert is_reference(reference, real)  # the same config under the reference id's snapshot is it
    link = tmp_path / "my-model"
    link.symlink_to(real, target_is_directory=True)
    assert is_reference(reference, str(link))  # symlinks are resolved to the snapshot they point at


def test_a_tiny_model_under_a_reference_snapshot_path_is_not_the_reference(tiny_bert, tmp_path):
    folder = snapshot(tmp_path / "hub", EMBEDDING.name)
    for item in tiny_bert.iterdir():
        (folder / item.name).write_bytes(item.read_bytes())
    assert provenance(str(folder)) == (EMBEDDING.name, REVISION)
    assert not is_reference(EMBEDDING, str(folder))  # 2 layers, width 32: not bge-large-en's shape


def test_a_folder_without_provenance_is_a_named_stand_in_never_an_error(tmp_path, capsys):
    empty = tmp_path / "no-provenance"
    empty.mkdir()
    assert provenance(str(empty)) is None and not is_reference(EMBEDDING, str(empty))
    raw = yaml.safe_load(TINY.read_text())
    raw["evaluation"]["metrics"]["facts"] |= {"entity_method": "uniner", "uniner_model": str(empty)}
    raw["retrieval"]["embedding_model"] = saved(BERT_LARGE, tmp_path / "bge-mirror")
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert cli_main(["plan", "--config", str(path), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    stand_ins = {item["key"]: item for item in plan["stand_ins"]}
    assert stand_ins["retrieval.embedding_model"]["paper"] == "BAAI/bge-large-en"
    assert plan["retrieval"]["paper"] is False
    entities = plan["metrics"]["entity_jaccard"]
    assert (entities["paper"], entities["provenance"], entities["label"]) == (
        False,
        None,
        "uniner:no-provenance",
    )
    assert "evaluation.metrics.facts.entity_method" in stand_ins
    assert {item["key"] for item in plan["missing"]} == {"evaluation.metrics.facts.uniner_model"}
