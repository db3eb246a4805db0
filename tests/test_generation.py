"""Batched greedy generation: left padding changes nothing, EOS stops, merged adapter = adapter on the fly."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from graphctx.errors import ConfigError
from graphctx.evaluation.settings import GenerationSettings
from graphctx.generation import Generator, length_sorted_batches, load_generator
from graphctx.model import ModelSpec, load_tokenizer, resolve_source
from graphctx.prompts import VARIANTS, build_prompt

QUESTIONS = [
    "How do I stake ADA?",
    "Why does my cardano-node stop syncing at epoch 290 after I upgraded it to version 1.35 on Ubuntu?",
    "What is a UTXO?",
    "Which Plutus version supports reference inputs, and how do I use them from cardano-cli?",
    "Is Daedalus a full node wallet?",
]


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> ModelSpec:
    cache = str(tmp_path_factory.mktemp("cache"))
    return ModelSpec(source="tiny-random", quantization="none", compute_dtype="float32", cache_dir=cache)


@pytest.fixture(scope="module")
def tokenizer(spec):
    return load_tokenizer(spec)


@pytest.fixture(scope="module")
def adapter_dir(spec, tokenizer, tmp_path_factory):
    """A LoRA adapter with random (non-zero) B matrices, so it changes the model's output."""
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(resolve_source(spec))
    config = LoraConfig(
        r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False
    )
    folder = tmp_path_factory.mktemp("adapter")
    get_peft_model(base, config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def reference_greedy(model, prompt_ids: list[int], steps: int) -> list[int]:
    """Greedy decoding of one unpadded prompt by full forward passes (no cache, no batching)."""
    ids = list(prompt_ids)
    with torch.no_grad():
        for _ in range(steps):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return ids[len(prompt_ids) :]


def test_batches_are_sorted_longest_first():
    assert length_sorted_batches([3, 9, 1, 9, 5], 2) == [[1, 3], [4, 0], [2]]
    assert length_sorted_batches([], 4) == []


def test_left_padded_batches_decode_like_single_prompts(spec, tokenizer):
    settings = GenerationSettings(max_new_tokens=6, batch_size=3)
    model = load_generator(spec, None, settings, "cpu")
    generator = Generator(model, tokenizer, settings)
    prompts = [build_prompt(VARIANTS["ZeroShot"], q, "") for q in QUESTIONS]
    answers = generator.generate(prompts)
    assert len({a.prompt_tokens for a in answers}) > 2  # lengths differ, so batches hold left padding
    for answer, (prompt_ids, _) in zip(answers, generator.encode(prompts), strict=True):
        assert answer.prompt_tokens == len(prompt_ids)
        assert answer.token_ids == reference_greedy(model, prompt_ids, 6)
        assert answer.text == tokenizer.decode(answer.token_ids, skip_special_tokens=True).strip()


def test_decoding_stops_at_eos(spec, tokenizer):
    settings = GenerationSettings(max_new_tokens=6, batch_size=2)
    model = load_generator(spec, None, settings, "cpu")
    generator = Generator(model, tokenizer, settings)
    prompt = build_prompt(VARIANTS["ZeroShot"], QUESTIONS[0], "")
    free = generator.generate([prompt])[0].token_ids
    generator.eos_ids = [free[2]]  # pretend the third generated token is EOS
    stopped = generator.generate([prompt, build_prompt(VARIANTS["ZeroShot"], QUESTIONS[1], "")])[0]
    assert stopped.token_ids == free[: free.index(free[2]) + 1]


def test_merged_adapter_equals_the_adapter_applied_on_the_fly(spec, tokenizer, adapter_dir):
    merged = load_generator(spec, adapter_dir, GenerationSettings(merge_adapter=True), "cpu")
    on_the_fly = load_generator(spec, adapter_dir, GenerationSettings(merge_adapter=False), "cpu")
    base = load_generator(spec, None, GenerationSettings(), "cpu")
    ids = torch.tensor([tokenizer("[INST]How do I stake ADA?[\\INST]Answer:")["input_ids"]])
    with torch.no_grad():
        merged_logits, adapter_logits, base_logits = (m(ids).logits for m in (merged, on_the_fly, base))
    assert not any("lora" in name for name, _ in merged.named_parameters())
    torch.testing.assert_close(merged_logits, adapter_logits, atol=1e-4, rtol=1e-4)
    assert (merged_logits - base_logits).abs().max() > 1e-2  # the adapter does change the answer


def test_four_bit_base_with_adapter_generates(spec, tokenizer, adapter_dir):
    settings = GenerationSettings(max_new_tokens=4, batch_size=2, merge_adapter=False)
    model = load_generator(replace(spec, quantization="nf4"), adapter_dir, settings, "cpu")
    answers = Generator(model, tokenizer, settings).generate(
        [build_prompt(VARIANTS["FineTuned"], q, "") for q in QUESTIONS[:3]]
    )
    assert [len(a.token_ids) for a in answers] == [4, 4, 4]


def test_missing_adapter_is_a_clear_error(spec, tmp_path):
    with pytest.raises(ConfigError, match=r"adapter_config\.json"):
        load_generator(spec, tmp_path, GenerationSettings(), "cpu")
