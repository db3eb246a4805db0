"""Bad input, round two: rows sharing an id, a false refusal after a crash, inputs checked before anything is
written, and cache entries that fail to load are moved aside and rebuilt."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from tiny_config import tiny_scorers, tiny_split

from graphctx.errors import ConfigError, DataError
from graphctx.evaluation.jsonl import RecordFile, check_unique_ids


def test_a_predictions_file_with_two_rows_of_one_id_is_refused_naming_file_and_id(tmp_path) -> None:
    path = tmp_path / "scores.jsonl"
    path.write_text(
        "".join(json.dumps({"id": i, "rouge1": s}) + "\n" for i, s in [(4, 0.1), (7, 0.5), (4, 0.9)])
    )
    with pytest.raises(DataError, match=rf"{path}: id 4 is on 2 rows"):
        RecordFile(path)


def test_appending_two_rows_of_one_id_is_refused_and_writes_nothing(tmp_path) -> None:
    records = RecordFile(tmp_path / "predictions.jsonl")
    with pytest.raises(DataError, match="id 3 is on 2 rows"):
        records.append([{"id": 3, "generated": "a"}, {"id": 3, "generated": "b"}])
    assert not records.path.exists() or records.path.read_text() == ""
    assert RecordFile(records.path).done == set()


def test_evaluated_rows_sharing_an_id_are_refused_naming_the_source() -> None:
    rows = [{"id": 1}, {"id": 2}, {"id": 2}, {"id": 5}, {"id": 5}]
    with pytest.raises(DataError, match=r"dump/Posts\.xml: id 2 is on 2 rows \(2 ids repeat\)"):
        check_unique_ids(rows, "dump/Posts.xml")
    check_unique_ids(rows[:2], "dump/Posts.xml")


def lora_adapter(folder: Path, cache: Path, seed: int, **tiny: int) -> Path:
    """A random LoRA adapter for the tiny random Llama (``tiny``: its size overrides), saved in ``folder``."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from graphctx.model import ModelSpec, resolve_source
    from graphctx.model.settings import TinyLlamaSettings

    spec = ModelSpec(source="tiny-random", cache_dir=str(cache), tiny=TinyLlamaSettings(**tiny))
    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(resolve_source(spec))
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, lora).save_pretrained(folder)
    return folder


def evaluation_config(tmp_path: Path, cardano_dir: Path, adapter: Path, encoder: Path) -> Path:
    """A config answering with the tiny random Llama (+ ``adapter``) on the recent cardano questions."""
    cache = tmp_path / "cache"
    settings = {
        "cache_dir": str(cache),
        "model": {"spec": {"source": "tiny-random"}},
        "data": {
            "dataset": {
                "source": str(cardano_dir),
                "split": tiny_split(train_start="2021-08-20"),
            },
        },
        "generation": {"max_new_tokens": 2, "batch_size": 1, "max_prompt_tokens": 64},
        "evaluation": {
            "adapter": str(adapter),
            "output_dir": str(tmp_path / "out"),
            "wandb_project": None,
            "metrics": tiny_scorers(str(encoder)),
        },
    }
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


@pytest.mark.slow
def test_a_run_that_crashed_before_any_prediction_does_not_refuse_a_rerun_with_other_settings(
    tmp_path, cardano_dir, tiny_bert
) -> None:
    from graphctx.evaluation.matrix.runner import MatrixEvaluation
    from graphctx.pipeline.config_file import load_config
    from graphctx.pipeline.contexts import RetrievedContext

    adapter = lora_adapter(tmp_path / "adapter", tmp_path / "cache", seed=0)
    weights = adapter / "adapter_model.safetensors"
    good = weights.read_bytes()
    weights.write_bytes(good[: len(good) // 2])  # a torn copy: loading the adapter fails
    config = evaluation_config(tmp_path, cardano_dir, adapter, tiny_bert)
    with pytest.raises(ConfigError, match=r"evaluation\.adapter: cannot read the adapter weights"):
        MatrixEvaluation(load_config(config), ["FineTuned"], limit=1).evaluate()
    predictions = tmp_path / "out" / "predictions" / "FineTuned.jsonl"
    assert predictions.with_suffix(".meta.json").is_file() and not predictions.exists()

    lora_adapter(adapter, tmp_path / "cache", seed=1)  # the corrected adapter: other settings
    rerun = MatrixEvaluation(load_config(config), ["FineTuned"], limit=1)
    rerun.guard.check_settings(rerun.variants[0], overwrite=False)  # refused before the fix
    rows = rerun.load_rows()
    rerun.generate(rows, {"FineTuned": [RetrievedContext([], [], [])]})
    assert [record["id"] for record in RecordFile(predictions).records.values()] == [rows[0]["id"]]
    # with a prediction made, other settings are still refused, and --overwrite still starts afresh
    lora_adapter(adapter, tmp_path / "cache", seed=2)
    with pytest.raises(ConfigError, match="FineTuned were made with other settings"):
        rerun.guard.check_settings(rerun.variants[0], overwrite=False)
    made = predictions.read_bytes()
    rerun.guard.check_settings(rerun.variants[0], overwrite=True)
    assert not predictions.exists()  # moved aside, never deleted
    (aside,) = (tmp_path / "out" / "stale").glob("*/predictions/FineTuned.jsonl")
    assert aside.read_bytes() == made


def training_config(tmp_path: Path, cardano_dir: Path) -> tuple[Path, Path]:
    """configs/tiny.yaml on the tiny random Llama, its loggers (W&B offline, CSV) writing under ``run``."""

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml").read_text())
    root = tmp_path / "run"
    trainer = config["trainer"]
    trainer["default_root_dir"] = str(root)
    config["model"]["spec"].update(source="tiny-random", quantization="none")
    config["data"]["dataset"]["source"] = str(cardano_dir)
    config["cache_dir"] = str(tmp_path / "cache")
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, root


def test_a_real_adapter_checkpoint_state_passes_the_ckpt_path_check(tmp_path) -> None:
    import torch

    from graphctx.model import InstructionTuner, ModelSpec
    from graphctx.model.settings import LoraSettings, TunerSettings
    from train import check_checkpoint

    lora = LoraSettings(r=4, target_modules=["q_proj", "v_proj"])
    spec = ModelSpec(source="tiny-random", quantization="none", cache_dir=str(tmp_path))
    tuner = InstructionTuner(TunerSettings(spec=spec, lora=lora))
    tuner.configure_model()
    state = {name: p.detach() for name, p in tuner.named_parameters() if p.requires_grad}
    path = tmp_path / "last.ckpt"
    torch.save({"state_dict": state, "global_step": 3, "loops": {}, "optimizer_states": []}, path)
    check_checkpoint(str(path), lora.target_modules, lora.r)
    with pytest.raises(
        ConfigError, match=r"lora_A\.default\.weight has rank \(4, 128\), model\.lora\.r is 8"
    ):
        check_checkpoint(str(path), lora.target_modules, 8)
    with pytest.raises(
        ConfigError, match=r"q_proj\.lora_A\.default\.weight is not a LoRA weight of .*\['v_proj'\]"
    ):
        check_checkpoint(str(path), ["v_proj"], lora.r)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("text", r"is not a readable checkpoint"),
        ("weights", r"is not a Lightning training checkpoint \(no loops, optimizer_states\)"),
        ("other-model", r"lm_head\.weight is not a LoRA weight of model\.lora\.target_modules"),
    ],
)
def test_a_ckpt_path_that_is_not_this_models_checkpoint_is_refused_before_anything_is_written(
    content, message, tmp_path, cardano_dir, capsys
) -> None:
    import torch

    from train import main as train_main

    config, root = training_config(tmp_path, cardano_dir)
    checkpoint = tmp_path / "model.ckpt"
    if content == "text":
        checkpoint.write_text("not a checkpoint\n")
    elif content == "weights":
        torch.save({"state_dict": {}, "global_step": 0}, checkpoint)
    else:
        state = {"lm_head.weight": torch.zeros(2, 2)}
        torch.save({"state_dict": state, "global_step": 1, "loops": {}, "optimizer_states": []}, checkpoint)
    assert train_main(["--config", str(config), "--ckpt_path", str(checkpoint)]) == 1
    error = capsys.readouterr().err
    assert re.search(rf"^error: --ckpt_path: {re.escape(str(checkpoint))}.*{message}", error, re.M), error
    assert "Traceback" not in error
    assert not root.exists()  # no W&B run, no CSV log folder, no config.yaml


def test_an_adapter_of_another_base_model_is_refused_naming_evaluation_adapter(tmp_path) -> None:
    from graphctx.generation.loading import load_generation_model
    from graphctx.generation.settings import GenerationSettings
    from graphctx.model import ModelSpec

    adapter = lora_adapter(tmp_path / "adapter", tmp_path / "cache", seed=0, hidden_size=64)
    spec = ModelSpec(source="tiny-random", quantization="none", cache_dir=str(tmp_path / "cache"))
    with pytest.raises(ConfigError) as refused:
        load_generation_model(spec, adapter, GenerationSettings(device="cpu"))
    message = str(refused.value)
    assert message.startswith(f"evaluation.adapter: {adapter} was trained on another base model")
    assert "q_proj.lora_A.weight has shape [4, 64], the base's layer is 128→128" in message
    assert "\n" not in message


@pytest.mark.parametrize("command", ["answer", "retrieve", "enhance"])
@pytest.mark.parametrize("question", ["", "  \n\t "])
def test_an_empty_question_is_refused_by_every_command(command, question, capsys) -> None:
    from graphctx.cli import main

    assert main([command, "--config", "configs/tiny.yaml", "--question", question]) == 1
    error = capsys.readouterr().err
    assert error.splitlines() == ["error: --question: the question is empty"], error


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_evaluate_refuses_a_limit_below_one(limit, capsys) -> None:
    from evaluate import main

    assert main(["--config", "configs/tiny.yaml", "--evaluation.limit", limit]) == 1
    error = capsys.readouterr().err
    assert error.strip().endswith(f"evaluation.limit: must be >= 1, got {limit}"), error


@pytest.mark.parametrize(
    ("old", "new"), [("--limit", "--evaluation.limit"), ("--output-dir", "--evaluation.output_dir")]
)
def test_evaluate_refuses_the_old_spellings_in_one_line(old, new, tmp_path, capsys) -> None:
    from evaluate import main

    argv = ["--config", "configs/tiny.yaml", f"{old}={tmp_path / 'x'}" if old == "--output-dir" else old, "2"]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [f"evaluate.py: {old} is now {new}"]
    assert list(tmp_path.iterdir()) == []


def test_an_evaluation_limit_below_one_in_the_config_is_refused(tmp_path) -> None:

    from graphctx.evaluation.matrix.runner import MatrixEvaluation
    from graphctx.pipeline.config_file import load_config

    path = tmp_path / "limit.yaml"
    path.write_text(yaml.safe_dump({"data": {"dataset": {"source": "dump"}}, "evaluation": {"limit": 0}}))
    with pytest.raises(ConfigError, match=r"invalid setting\(s\): evaluation\.limit: must be >= 1, got 0$"):
        MatrixEvaluation(load_config(path))  # refused by load_config, before the run builds anything


# ---- cache entries that fail to load are moved aside and rebuilt ---------------------------------------
def truncate(path: Path) -> None:
    """Cut a file to half its bytes, as a copy cut short or a disk fault leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def healed(kind: Path, damaged: Path, error: str) -> None:
    """The damaged entry was named on stderr and moved aside beside the rebuilt one."""
    assert f"graphctx: cache entry {damaged}" in error and "rebuilding" in error, error
    assert len([p for p in kind.iterdir() if ".broken-" in p.name]) == 1


def test_a_truncated_converted_model_is_moved_aside_and_rebuilt(tmp_path, capsys) -> None:
    from transformers import AutoModelForCausalLM

    from graphctx.model import ModelSpec, resolve_source

    spec = ModelSpec(source="tiny-random", cache_dir=str(tmp_path))
    folder = Path(resolve_source(spec))
    model = AutoModelForCausalLM.from_pretrained(folder)
    expected = {name: tensor.clone() for name, tensor in model.state_dict().items()}  # not the mmapped file
    del model
    truncate(folder / "model.safetensors")
    assert Path(resolve_source(spec)) == folder
    healed(folder.parent, folder, capsys.readouterr().err)
    rebuilt = AutoModelForCausalLM.from_pretrained(folder).state_dict()
    assert all((rebuilt[name] == tensor).all() for name, tensor in expected.items())


POOL = ["how do I stake ada", "what is a utxo", "plutus script fails to validate", "how to stake ada safely"]


@pytest.mark.parametrize("damage", ["embeddings", "graph.pt", "stats.json"])
def test_a_damaged_embedding_file_or_retrieval_index_is_moved_aside_and_rebuilt(
    damage, tiny_bert, tmp_path, capsys
) -> None:
    import torch

    from graphctx.retrieval.builders import build_embeddings
    from graphctx.retrieval.embeddings import embedding_cache_path
    from graphctx.retrieval.index import build_index
    from graphctx.retrieval.settings import RetrievalSettings

    settings = RetrievalSettings(embedding_model=str(tiny_bert), device="cpu", threshold=0.3)
    ids = list(range(len(POOL)))
    expected = build_index(ids, POOL, settings, cache_dir=tmp_path)
    if damage == "embeddings":
        damaged = embedding_cache_path(POOL, settings.embedding_model, device="cpu", cache_dir=tmp_path)
        truncate(damaged)
        torch.testing.assert_close(build_embeddings(POOL, settings, cache_dir=tmp_path), expected.embeddings)
    else:
        damaged = next((tmp_path / "retrieval-index").iterdir())
        truncate(damaged / damage)
        index = build_index(ids, POOL, settings, cache_dir=tmp_path)
        assert index.graph.edge_index.tolist() == expected.graph.edge_index.tolist()
        assert index.stats == expected.stats
    healed(damaged.parent, damaged, capsys.readouterr().err)


def test_a_damaged_kg_store_and_enhanced_context_are_moved_aside_and_rebuilt(
    tmp_path, llama_tokenizer, capsys
) -> None:
    from graphctx.knowledge.budget import QAPair, build_token_counter
    from graphctx.knowledge.enhance import build_enhancer
    from graphctx.knowledge.settings import KnowledgeSettings
    from graphctx.knowledge.store import build_store

    label = "http://www.w3.org/2000/01/rdf-schema#label"
    kg_file = tmp_path / "kg.nt"
    kg_file.write_text(
        f'<http://example.org/nginx> <{label}> "nginx"@en .\n'
        "<http://example.org/nginx> <http://www.wikidata.org/prop/direct/P306> "
        "<http://example.org/linux> .\n"
        f'<http://example.org/linux> <{label}> "Linux"@en .\n'
    )
    settings = KnowledgeSettings(kg_dir="", ntriples=[str(kg_file)], cache_dir=str(tmp_path / "cache"))
    store = build_store(settings)
    truncate(store / "gazetteer.json")
    assert build_store(settings) == store
    healed(store.parent, store, capsys.readouterr().err)

    enhancer = build_enhancer(settings, build_token_counter(llama_tokenizer))
    pairs = [QAPair("How do I restart nginx on Linux?", "Run systemctl restart nginx.", 1)]
    expected = enhancer.enhance("nginx will not start", pairs)
    (cached,) = (tmp_path / "cache" / "enhanced").iterdir()
    truncate(cached)
    assert enhancer.enhance("nginx will not start", pairs) == expected
    healed(cached.parent, cached, capsys.readouterr().err)
