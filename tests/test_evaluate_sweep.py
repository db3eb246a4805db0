"""evaluate.py --models: several base models zero-shot and with context in one table, resumable; a model
that cannot be found stops the sweep with one line before anything is written."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from evaluation_workspace import write_workspace
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

import evaluate
from graphctx.errors import ConfigError
from graphctx.evaluation.jsonl import read_records
from graphctx.evaluation.matrix.sweep import (
    SAME_QUESTIONS,
    one_question_set,
    run_sweep,
    sweep_markdown,
    sweep_variants,
)
from graphctx.model import ModelSpec, load_tokenizer, resolve_source
from graphctx.pipeline.config_file import load_config

VARIANTS = ["ZeroShot", "Base-TextGen"]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, cardano_dir, tiny_bert) -> tuple[Path, Path, Path]:
    """The evaluation workspace and a second tiny Llama folder (other width and seed, the same tokenizer)."""
    root = tmp_path_factory.mktemp("sweep")
    evaluation = {"output_dir": str(root / "out"), "limit": 2, "bootstrap_samples": 20}
    generation = {"max_new_tokens": 3, "batch_size": 2, "max_prompt_tokens": 320}
    config = write_workspace(root, cardano_dir, tiny_bert, "tiny.yaml", evaluation, generation=generation)
    spec = ModelSpec(source="tiny-random", cache_dir=str(root / "cache"))
    reference = AutoModelForCausalLM.from_pretrained(resolve_source(spec)).config.to_dict()
    other = root / "other-llama"
    LlamaForCausalLM(
        LlamaConfig(**{**reference, "hidden_size": 32, "intermediate_size": 64})
    ).save_pretrained(other)
    load_tokenizer(spec).save_pretrained(other)
    return root, config, other


def configs(config: Path, models: list[str]):
    return {m: load_config(config, ["--model.spec.source", m]) for m in models}


def test_a_sweep_runs_only_base_model_variants():
    assert [v.name for v in sweep_variants(None)][:2] == ["ZeroShot", "Base-TextGen"]
    with pytest.raises(ConfigError, match=r"^--models: a sweep runs base-model variants only.*FineTuned"):
        sweep_variants(["ZeroShot", "FineTuned"])


@pytest.mark.slow
def test_sweep_writes_one_table_with_the_model_as_a_column_and_resumes(workspace):
    root, config, other = workspace
    models = ["tiny-random", str(other)]
    markdown = run_sweep(configs(config, models), VARIANTS, None, None)
    assert "| Model | Variant |" in markdown
    for model in models:
        assert f"| {model} | Zero-shot |" in markdown and f"| {model} | w/o INST TextGen |" in markdown
    rows = list(csv.DictReader((root / "out" / "sweep.csv").read_text().splitlines()))
    assert [(r["generation_model"], r["variant"]) for r in rows] == [(m, v) for m in models for v in VARIANTS]
    predictions = root / "out" / "models" / "other-llama" / "predictions" / "ZeroShot.jsonl"
    assert len(read_records(predictions)) == 2
    before = predictions.read_bytes()
    assert run_sweep(configs(config, models), VARIANTS, None, None) == markdown  # resumed: nothing redone
    assert predictions.read_bytes() == before


@pytest.mark.slow
def test_a_sweep_model_that_cannot_be_found_is_one_error_line_and_nothing_is_written(
    workspace, tmp_path, capsys
):
    _, config, _ = workspace
    out = tmp_path / "out"
    argv = [
        "--config",
        str(config),
        "--models",
        "tiny-random",
        "no-such-org/no-such-model",
        "--evaluation.output_dir",
        str(out),
    ]
    assert evaluate.main([*argv, "--variants", *VARIANTS]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("error: ") and "no-such-org/no-such-model" in lines[-1]
    assert not any(line.startswith("error: ") for line in lines[:-1])
    assert not out.exists()


def test_a_sweep_filters_once_so_models_with_other_tokenizers_answer_the_same_questions(tiny_bert, tmp_path):
    # a Llama SentencePiece tokenizer and a BERT WordPiece one count cardano's pairs differently
    overrides = ["--data.dataset.filters.max_tokens", "250"]

    def config(model: str):
        argv = [*overrides, "--model.spec.source", model]
        return load_config(REPO / "configs" / "tiny.yaml", [*argv, "--cache_dir", str(tmp_path / "cache")])

    models = {"tiny-random": config("tiny-random"), str(tiny_bert): config(str(tiny_bert))}
    alone = {m: c.load_dataset() for m, c in models.items()}
    kept = {m: {i for split in d.values() for i in split["id"]} for m, d in alone.items()}
    assert kept["tiny-random"] != kept[str(tiny_bert)]  # each model alone: other questions
    shared = one_question_set(models)
    together = {m: c.load_dataset() for m, c in shared.items()}
    ids = [{split: list(d[split]["id"]) for split in d} for d in together.values()]
    assert ids[0] == ids[1]  # one question set, splits and pool included
    assert set().union(*ids[0].values()) == kept["tiny-random"] & kept[str(tiny_bert)]
    assert SAME_QUESTIONS in sweep_markdown({})
