"""The memory estimate of ``graphctx plan --json`` (``memory``): parameter counts from config shapes alone,
bytes per dtype, the KV cache, and the start-up refusal on a GPU that is too small."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, BertConfig, DynamicCache

from graphctx.errors import ConfigError
from graphctx.model import ModelSpec, load_base_model, resolve_source
from graphctx.pipeline.config_file import load_config
from graphctx.prefill import PREFIX_CACHE_BYTES
from graphctx.stack.memory import (
    GIB,
    MemoryEstimate,
    check_memory,
    dtype_bytes,
    kv_cache_bytes,
    nf4_bytes,
    prefill_bytes,
)
from graphctx.stack.model_shapes import KNOWN_CONFIGS, model_config, shape_of
from graphctx.stack.model_stack import ModelStack
from graphctx.stack.report import plan_json
from graphctx.stack.shape_table import KNOWN_SHAPES, source_shape

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> ModelSpec:
    cache = str(tmp_path_factory.mktemp("cache"))
    return ModelSpec(source="tiny-random", compute_dtype="bfloat16", cache_dir=cache)


def test_parameter_counts_from_the_config_match_the_built_model(spec):
    shape = shape_of(model_config(spec.source, spec.tiny))
    model = AutoModelForCausalLM.from_pretrained(resolve_source(spec))
    assert shape.params == sum(p.numel() for p in model.parameters())
    linear = [m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n != "lm_head"]
    assert shape.linear == sum(m.weight.numel() for m in linear)


def test_llama2_parameter_counts_are_the_published_ones():
    """Meta's model cards: 6.74B and 13.0B parameters (exact counts of the HF checkpoints)."""
    assert shape_of(model_config("meta-llama/Llama-2-7b-hf")).params == 6_738_415_616
    assert shape_of(model_config("meta-llama/Llama-2-13b-hf")).params == 13_015_864_320


@pytest.mark.parametrize("source", sorted(KNOWN_CONFIGS))
def test_the_shape_table_is_the_meta_device_count_of_every_known_config(source):
    """KNOWN_SHAPES cannot drift from the configs it stands for: each entry is recounted here."""
    assert KNOWN_SHAPES.keys() == KNOWN_CONFIGS.keys()
    assert source_shape(source) == KNOWN_SHAPES[source] == shape_of(model_config(source))


def test_a_local_folder_is_counted_from_its_config_even_under_a_known_name(tmp_path, monkeypatch):
    """A folder named like a known id holds another model: its own config.json is counted, not the table."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "roberta-large"
    BertConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2
    ).save_pretrained(folder)
    shape = source_shape("roberta-large")
    assert shape == shape_of(model_config(str(folder)))
    assert (shape.layers, shape.hidden) == (2, 32)  # not the table's roberta-large (24 layers of 1024)


def test_nf4_bytes_match_the_quantised_model_in_memory(spec):
    """0.5 byte per linear weight + the double-quantised block scales + bf16 for the rest, against the
    tensors bitsandbytes actually holds (weights, absmax and its scales, the code books)."""
    model = load_base_model(spec, "cpu")
    held = model.get_memory_footprint()
    estimate = nf4_bytes(shape_of(model_config(spec.source, spec.tiny)), True, "bfloat16")
    assert abs(held - estimate) / held < 0.02


def test_kv_cache_bytes_match_a_real_cache(spec):
    model = AutoModelForCausalLM.from_pretrained(resolve_source(spec), dtype=torch.bfloat16)
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=torch.ones(3, 11, dtype=torch.long), past_key_values=cache, use_cache=True)
    held = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    assert held == kv_cache_bytes(shape_of(model_config(spec.source, spec.tiny)), 11, 3)


def test_the_answers_stage_counts_the_prefill_beside_the_kv_cache():
    config = load_config(CONFIGS / "tiny.yaml", devices=False)
    spec, generation = config.model.spec, config.generation
    shape = shape_of(model_config(spec.source, spec.tiny))
    h, kv, i, vocab = shape.hidden, shape.kv_width, shape.intermediate, shape.vocab
    batch, prompt = generation.batch_size, generation.max_prompt_tokens
    # by hand: the widest moment of one block per prompt token in bf16, and the last position's logits
    by_hand = (h + max(3 * h + 2 * kv, h + 3 * i)) * prompt * batch * 2 + batch * vocab * 4
    assert prefill_bytes(shape, prompt, batch) == by_hand
    weights = shape.params * dtype_bytes(generation.dtype)
    kv_cache = kv_cache_bytes(shape, prompt + generation.max_new_tokens, batch)
    padded = replace(config, generation=replace(generation, backend="generate"))
    assert MemoryEstimate(padded).evaluate_stages()["answers"] == weights + kv_cache + by_hand
    # backend prefix (tiny.yaml's): one prompt prefilled at a time, earlier prompts' keys and values kept
    assert generation.backend == "prefix"
    one_prompt = prefill_bytes(shape, prompt, 1)
    expected = weights + kv_cache + one_prompt + PREFIX_CACHE_BYTES
    assert MemoryEstimate(config).evaluate_stages()["answers"] == expected


def test_a_plan_asks_the_hub_nothing():
    """A model id that is neither known nor in the HF cache has no shape here, said at once: asked of the
    Hub, transformers retries for about 23 s where the Hub cannot be reached, before every plan (the
    tiny default's judge name lexical-containment was asked for so). In a process of its own: the tests'
    own process has the Hub switched off at import."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    probe = (
        "import time; from graphctx.stack.model_shapes import model_config; "
        "model_config('warm-up'); t = time.monotonic(); "  # the first call imports transformers' configs
        "assert model_config('no-such-model') is None; print(time.monotonic() - t)"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert float(done.stdout.split()[-1]) < 2.0


def test_the_plan_states_memory_per_stage_for_the_paper_configs():
    plan = plan_json(ModelStack(load_config(CONFIGS / "llama2-7b-askubuntu.yaml", devices=False)))
    memory = plan["memory"]
    stages = memory["evaluate"]["stages"]
    assert set(stages) == {
        "contexts",
        "answers",
        "rouge+bertscore",
        "fact_score",
        "entity_jaccard",
        "autoais",
    }
    assert memory["unknown"] == []
    assert memory["evaluate"]["peak_gib"] == max(stages.values())
    assert 20 < stages["autoais"] < 22  # T5-XXL (11B) in bf16
    assert 12 < memory["train"]["peak_gib"] < 40  # NF4 7B + LoRA r=64 + activations + the callback
    # graphctx serve holds the contexts' models and the answer model together (rounding: one GiB digit)
    assert abs(memory["serve"]["peak_gib"] - stages["contexts"] - stages["answers"]) < 0.01


def test_start_up_refuses_a_gpu_with_less_free_memory_than_the_largest_stage(monkeypatch):
    """No GPU here: torch's two CUDA queries answer as a 24 GiB card with 8 GiB free would."""
    memory = ModelStack(load_config(CONFIGS / "llama2-7b-askubuntu.yaml", devices=False)).memory
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (8 * GIB, 24 * GIB))
    need = memory["evaluate"]["peak_gib"]
    with pytest.raises(
        ConfigError,
        match=rf"evaluate: the answers stage needs about {need:.1f} GiB per "
        r"rank, cuda:0 has 8.0 GiB free of 24.0",
    ):
        check_memory(memory, "evaluate", "cuda:0")
    with pytest.raises(ConfigError, match=r"train: the training stage needs about"):
        check_memory(memory, "train", "cuda:0")
    check_memory(memory, "evaluate", "cpu")  # the CPU is never checked


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("llama2-*.yaml")), ids=lambda p: p.name)
def test_the_config_headers_state_the_estimated_memory(path):
    import re

    header = " ".join(path.read_text().split("\n")[:4])
    train, evaluate = (
        int(n) for n in re.search(r"~(\d+) GiB to train and ~(\d+) GiB to evaluate", header).groups()
    )
    memory = ModelStack(load_config(path, devices=False)).memory
    assert train == round(memory["train"]["peak_gib"])
    assert evaluate == round(memory["evaluate"]["peak_gib"])
