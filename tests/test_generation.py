"""Batched greedy generation: left padding changes nothing, EOS and stop strings end answers, the merged
adapter computes what the (4-bit) model + adapter it was trained on computes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import bitsandbytes as bnb
import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from graphctx.errors import ConfigError
from graphctx.generation.decoder import Generator, length_sorted_batches
from graphctx.generation.loading import load_generation_model
from graphctx.generation.settings import GenerationSettings
from graphctx.knowledge.budget import QAPair
from graphctx.model import ModelSpec, load_tokenizer, resolve_source
from graphctx.model.export import export_merged
from graphctx.prompts import BASE_STOP_STRINGS, VARIANTS, build_prompt

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
    model = load_generation_model(spec, None, settings, "cpu")
    generator = Generator(model, tokenizer, settings)
    prompts = [build_prompt(VARIANTS["ZeroShot"], q) for q in QUESTIONS]
    answers = generator.generate(prompts, stop_strings=())
    assert len({a.prompt_tokens for a in answers}) > 2  # lengths differ, so batches hold left padding
    for answer, encoded in zip(answers, generator.encode(prompts), strict=True):
        assert answer.prompt_tokens == len(encoded.ids)
        assert answer.token_ids == reference_greedy(model, encoded.ids, 6)
        assert answer.text == tokenizer.decode(answer.token_ids, skip_special_tokens=True).strip()


def test_decoding_stops_at_eos(spec, tokenizer):
    settings = GenerationSettings(max_new_tokens=6, batch_size=2)
    model = load_generation_model(spec, None, settings, "cpu")
    generator = Generator(model, tokenizer, settings)
    prompt = build_prompt(VARIANTS["ZeroShot"], QUESTIONS[0])
    free = generator.generate([prompt], stop_strings=())[0]
    assert free.stop == "length"
    generator.eos_ids = [free.token_ids[2]]  # pretend the third generated token is EOS
    second = build_prompt(VARIANTS["ZeroShot"], QUESTIONS[1])
    stopped = generator.generate([prompt, second], stop_strings=())[0]
    assert stopped.token_ids == free.token_ids[: free.token_ids.index(free.token_ids[2]) + 1]
    assert stopped.stop == "eos"


def test_merged_adapter_equals_the_adapter_applied_on_the_fly(spec, tokenizer, adapter_dir):
    merged = load_generation_model(spec, adapter_dir, GenerationSettings(merge_adapter=True), "cpu")
    on_the_fly = load_generation_model(spec, adapter_dir, GenerationSettings(merge_adapter=False), "cpu")
    base = load_generation_model(spec, None, GenerationSettings(), "cpu")
    ids = torch.tensor([tokenizer("[INST]How do I stake ADA?[\\INST]Answer:")["input_ids"]])
    with torch.no_grad():
        merged_logits, adapter_logits, base_logits = (m(ids).logits for m in (merged, on_the_fly, base))
    assert not any("lora" in name for name, _ in merged.named_parameters())
    torch.testing.assert_close(merged_logits, adapter_logits, atol=1e-4, rtol=1e-4)
    assert (merged_logits - base_logits).abs().max() > 1e-2  # the adapter does change the answer


def test_merged_nf4_adapter_equals_the_four_bit_model_it_was_trained_on(spec, tokenizer, adapter_dir):
    """QLoRA: the adapter was trained against the NF4 weights, so ``merge_adapter`` merges it into those
    (dequantised), not into the original unquantised weights (the old policy, kept here as the bug)."""
    nf4 = replace(spec, quantization="nf4")  # compute dtype float32, generation dtype float32 on the CPU
    merged = load_generation_model(nf4, adapter_dir, GenerationSettings(merge_adapter=True), "cpu")
    four_bit = load_generation_model(nf4, adapter_dir, GenerationSettings(merge_adapter=False), "cpu")
    merged_unquantised = load_generation_model(
        spec, adapter_dir, GenerationSettings(merge_adapter=True), "cpu"
    )
    ids = torch.tensor([tokenizer("[INST]How do I stake ADA?[\\INST]Answer:")["input_ids"]])
    with torch.no_grad():
        logits = [m(ids).logits for m in (merged, four_bit, merged_unquantised)]
    assert not any(isinstance(m, bnb.nn.Linear4bit) for m in merged.modules())
    assert not any("lora" in name for name, _ in merged.named_parameters())
    tolerance = 1e-4  # float32 rounding of W_deq + (alpha/r)·B·A vs the two matmuls; measured ~6e-7
    assert (logits[0] - logits[1]).abs().max() <= tolerance
    # the old policy scores other weights: measured ~0.1 on this tiny model (logits of magnitude ~1)
    assert (logits[2] - logits[1]).abs().max() > 100 * tolerance


def test_four_bit_base_with_adapter_generates(spec, tokenizer, adapter_dir):
    settings = GenerationSettings(max_new_tokens=4, batch_size=2, merge_adapter=False)
    model = load_generation_model(replace(spec, quantization="nf4"), adapter_dir, settings, "cpu")
    answers = Generator(model, tokenizer, settings).generate(
        [build_prompt(VARIANTS["FineTuned"], q) for q in QUESTIONS[:3]],
        stop_strings=VARIANTS["FineTuned"].stop_strings,
    )
    assert [len(a.token_ids) for a in answers] == [4, 4, 4]


def test_missing_adapter_is_a_clear_error(spec, tmp_path):
    with pytest.raises(ConfigError, match=r"adapter_config\.json"):
        load_generation_model(spec, tmp_path, GenerationSettings(), "cpu")


# ---- stop strings: a base model continues the few-shot pattern ------------------------------------------

SHOTS = [
    QAPair("How do I stake ADA?", "Delegate your ADA to a stake pool from your wallet (Daedalus or Yoroi)."),
    QAPair(
        "What is a UTXO?",
        "An unspent transaction output: an amount of ADA locked at an address that a later transaction "
        "can spend.",
    ),
]
FEW_SHOT_QUESTIONS = ["Is Daedalus a full node wallet?", "How do I run a cardano-node on Ubuntu?"]


@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2-135M-Instruct (the packaged GGUF, converted once into the default graphctx cache, ~30 s the
    first time) and its tokenizer."""
    spec = ModelSpec(source="smollm2-gguf", quantization="none", compute_dtype="float32")
    return load_generation_model(spec, None, GenerationSettings(), "cpu"), load_tokenizer(spec)


def test_only_base_variants_have_stop_strings():
    assert BASE_STOP_STRINGS == ("\nQuestion:", "\nKnowledge:")
    for variant in VARIANTS.values():
        assert variant.stop_strings == (BASE_STOP_STRINGS if variant.model == "base" else ())


def test_base_variant_answers_end_before_the_next_question(smollm2, one_torch_thread):
    """Greedy SmolLM2 writes a whole next ``Question: … Answer: …`` block after its answer; the stop string
    ends decoding there (in every row of a left-padded batch) and the block is cut from the answer."""
    model, tokenizer = smollm2
    variant = VARIANTS["Base-TextGen"]
    settings = GenerationSettings(max_new_tokens=17, batch_size=2)
    generator = Generator(model, tokenizer, settings)
    prompts = [build_prompt(variant, question, SHOTS) for question in FEW_SHOT_QUESTIONS]
    unstopped = generator.generate(prompts, stop_strings=())
    # the bug: without stop strings the next few-shot block becomes part of the scored answer
    assert all(a.stop == "length" and "\nQuestion:" in a.text for a in unstopped)
    steps: list[int] = []
    hook = model.register_forward_hook(lambda *_: steps.append(1))
    try:
        stopped = generator.generate(prompts, stop_strings=variant.stop_strings)
    finally:
        hook.remove()
    assert len(steps) < settings.max_new_tokens  # decoding ended when the last row wrote "\nQuestion:"
    for free, cut in zip(unstopped, stopped, strict=True):
        assert cut.stop == "stop_string"
        assert cut.text and cut.text == free.text[: free.text.index("\nQuestion:")].strip()
        assert free.token_ids[: len(cut.token_ids)] == cut.token_ids
        kept = tokenizer.decode(cut.token_ids)
        assert "Question" not in kept and kept.strip() == cut.text


def test_answer_is_cut_before_the_stop_string(smollm2):
    """The kept tokens end before the stop string, also when a token straddles its start (a "\n\n"
    token before "\nQuestion:"); EOS before any stop string ends the answer as EOS."""
    model, tokenizer = smollm2
    generator = Generator(model, tokenizer, GenerationSettings())

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    newlines = tokenizer.convert_tokens_to_ids("ĊĊ")  # one byte-level token for "\n\n"
    answer = generator.answer([*ids(" Yes."), newlines, *ids("Question:")], BASE_STOP_STRINGS)
    assert (answer.text, answer.token_ids, answer.stop) == ("Yes.", ids(" Yes."), "stop_string")
    answer = generator.answer(ids(" Use Yoroi.\nKnowledge:\nYoroi is a wallet"), BASE_STOP_STRINGS)
    assert (answer.text, answer.token_ids, answer.stop) == ("Use Yoroi.", ids(" Use Yoroi."), "stop_string")
    eos = tokenizer.eos_token_id
    answer = generator.answer([*ids(" Yes."), eos, *ids("\nQuestion:")], BASE_STOP_STRINGS)
    assert (answer.text, answer.token_ids, answer.stop) == ("Yes.", [*ids(" Yes."), eos], "eos")
    answer = generator.answer(ids(" Yes.\nQuestion:"), ())
    assert answer.stop == "length" and answer.text == "Yes.\nQuestion:"


def _checkpoint(spec: ModelSpec) -> dict[str, torch.Tensor]:
    """The released weights: the model's safetensors file, read directly."""
    from safetensors.torch import load_file

    return load_file(str(Path(resolve_source(spec)) / "model.safetensors"))


def test_released_base_decodes_the_checkpoint_not_the_dequantised_nf4_base(spec):
    """The base rows and the LLM extractor (``weights="released"``) read the checkpoint as published; the
    trained weights under QLoRA are the NF4 base dequantised, which differ from it."""
    nf4 = replace(spec, quantization="nf4")
    released = load_generation_model(nf4, None, GenerationSettings(), "cpu", "released")
    trained = load_generation_model(nf4, None, GenerationSettings(), "cpu", "trained")
    checkpoint = _checkpoint(spec)
    name = "model.layers.0.mlp.gate_proj.weight"
    assert not any(isinstance(m, bnb.nn.Linear4bit) for m in released.modules())
    for key, value in released.state_dict().items():
        if key in checkpoint:
            torch.testing.assert_close(value, checkpoint[key].to(value.dtype), atol=0, rtol=0)
    assert (trained.state_dict()[name] - checkpoint[name]).abs().max() > 1e-3  # NF4 rounding


def test_released_weights_take_no_adapter(spec, adapter_dir):
    with pytest.raises(ValueError, match="trained against"):
        load_generation_model(spec, adapter_dir, GenerationSettings(), "cpu", "released")


def test_the_default_merged_export_is_the_merge_evaluate_scores(spec, adapter_dir, tmp_path):
    """``model.export.merge``: by default the adapter goes into the dequantised NF4 base, as in evaluate.py
    (generation dtype bfloat16); ``merge_base: released`` keeps the merge into the original weights."""
    nf4 = replace(spec, quantization="nf4")
    evaluated = load_generation_model(
        nf4, adapter_dir, GenerationSettings(dtype="bfloat16"), "cpu"
    ).state_dict()
    exported = _checkpoint_of(export_merged(nf4, adapter_dir, tmp_path / "merged"))
    other = _checkpoint_of(export_merged(nf4, adapter_dir, tmp_path / "released", "released"))
    assert exported and exported.keys() <= evaluated.keys()
    for key, value in exported.items():
        torch.testing.assert_close(value, evaluated[key], atol=0, rtol=0)
    name = "model.layers.0.self_attn.q_proj.weight"
    assert (other[name].float() - exported[name].float()).abs().max() > 1e-3


def _checkpoint_of(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))
