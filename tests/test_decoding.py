"""The two decoding backends (graphctx.decoding): transformers' continuous batching gives the tokens padded
``generate`` batches give, greedy on the CPU, through the answers, UniversalNER and the LLM extractor."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from transformers import AutoModelForCausalLM

from graphctx.decoding import greedy_new_tokens, until_eos
from graphctx.errors import ConfigError
from graphctx.generation.decoder import Generator
from graphctx.generation.settings import GenerationSettings
from graphctx.knowledge.llm import GenerationModel, LLMExtractor
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.model import ModelSpec, load_tokenizer, resolve_source

TEXTS = [
    "How do I stake ADA?",
    "Why does my cardano-node stop syncing at epoch 290 after I upgraded it to version 1.35 on Ubuntu?",
    "What is a UTXO?",
    "Which Plutus version supports reference inputs, and how do I use them from cardano-cli?",
    "Is Daedalus a full node wallet?",
    "Run sudo apt install cardano-wallet, then restart the node with the new topology file.",
]


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """The tiny random Llama with the real Llama tokenizer, and prompts of 6-30 tokens."""
    spec = ModelSpec(source="tiny-random", cache_dir=str(tmp_path_factory.mktemp("cache")))
    model = AutoModelForCausalLM.from_pretrained(resolve_source(spec), attn_implementation="sdpa").eval()
    tokenizer = load_tokenizer(spec)
    return model, tokenizer, [tokenizer(text)["input_ids"] for text in TEXTS]


def decode(model, prompts, backend, eos_ids, batch_size=4, max_new_tokens=12):
    with torch.no_grad():
        return greedy_new_tokens(
            model,
            prompts,
            backend=backend,
            max_new_tokens=max_new_tokens,
            eos_ids=eos_ids,
            pad_id=0,
            batch_size=batch_size,
        )


def test_continuous_batching_gives_the_padded_batches_tokens(llama, one_torch_thread):
    model, _, prompts = llama
    padded = decode(model, prompts, "generate", [2])
    assert [len(ids) for ids in padded] == [12] * len(prompts)  # a random model: no EOS in 12 steps
    assert decode(model, prompts, "continuous", [2]) == padded
    assert decode(model, prompts, "generate", [2], batch_size=1) == padded  # unpadded, one at a time
    # an EOS mid-answer (a token one answer emits at step 4): each answer ends through its first one
    eos = padded[0][3]
    stopped = decode(model, prompts, "generate", [eos])
    assert stopped == [until_eos(ids, [eos]) for ids in padded] and len(stopped[0]) == 4
    assert decode(model, prompts, "continuous", [eos]) == stopped


def test_answers_and_stop_strings_match_across_backends(llama, one_torch_thread):
    model, tokenizer, prompts = llama
    settings = GenerationSettings(max_new_tokens=10, batch_size=3, device="cpu")
    static = Generator(model, tokenizer, settings)
    reference = static.generate_ids(prompts, stop_strings=())
    # a stop string from inside the first answer: continuous batching cuts afterwards what generate stops at
    stop = reference[0].text.split()[len(reference[0].text.split()) // 2]
    continuous = Generator(model, tokenizer, replace(settings, backend="continuous"))
    for stop_strings in ((), (stop,)):
        expected = static.generate_ids(prompts, stop_strings=stop_strings)
        assert continuous.generate_ids(prompts, stop_strings=stop_strings) == expected
    assert expected[0].stop == "stop_string" and stop not in expected[0].text


def test_the_llm_extractor_replies_alike_with_either_backend(llama, one_torch_thread):
    model, tokenizer, _ = llama
    settings = KnowledgeSettings(llm_model="", llm_max_new_tokens=6, batch_size=2)
    replies = {  # the generation model lent with its backend, as evaluate.py lends it
        backend: LLMExtractor.from_settings(
            settings, GenerationModel(model, tokenizer, backend=backend, source_identity=None)
        )
        for backend in ("generate", "continuous")
    }
    assert replies["continuous"].backend == "continuous"
    replies = {backend: extractor.generate(TEXTS[:3]) for backend, extractor in replies.items()}
    assert replies["generate"] == replies["continuous"] and all(replies["generate"])


def test_prefilling_from_shared_prefixes_gives_the_padded_batches_tokens(llama, one_torch_thread):
    """backend: prefix prefills each prompt alone from the longest prefix an earlier prompt shares (here:
    the second round repeats every prompt with text appended, as TextContextGen extends TextGen's pairs),
    then decodes the batch from the stacked caches: the same tokens as the padded batch, with the shared
    tokens taken from the cache instead of computed again."""
    model, tokenizer, prompts = llama
    longer = [ids + tokenizer(" Knowledge: Cardano is a blockchain.")["input_ids"][1:] for ids in prompts]
    settings = GenerationSettings(max_new_tokens=10, batch_size=4, device="cpu")
    padded = Generator(model, tokenizer, settings)
    prefix = Generator(model, tokenizer, replace(settings, backend="prefix"))
    eos = padded.generate_ids(prompts[:1], stop_strings=())[0].token_ids[3]  # an EOS mid-answer too
    for generator in (padded, prefix):
        generator.eos_ids = [eos]
    reused = []
    for batch in (prompts, longer, prompts[:1] + longer[:3]):
        assert prefix.generate_ids(batch, stop_strings=()) == padded.generate_ids(batch, stop_strings=())
        reused.append(prefix.prefixes.reused_tokens - sum(reused))
    # round two reuses each prompt of round one whole (all but its last token), round three all of it
    assert reused[1] == sum(len(ids) - 1 for ids in prompts)
    assert reused[2] == len(prompts[0]) - 1 + sum(len(ids) - 1 for ids in longer[:3])
    assert decode(model, longer, "prefix", [2]) == decode(model, longer, "generate", [2])


def test_a_prefix_cache_keeps_the_most_recently_used_within_its_budget():
    from graphctx.prefill import PrefixCache

    layer = (torch.zeros(1, 1, 4, 2), torch.zeros(1, 1, 4, 2))  # 64 bytes a prompt
    cache = PrefixCache(max_bytes=128)
    cache.add(torch.tensor([1, 2, 3, 4]), [layer])
    cache.add(torch.tensor([5, 6, 7, 8]), [layer])
    assert cache.longest(torch.tensor([1, 2, 9]))[0] == 2  # a hit makes [1, 2, 3, 4] the most recent
    cache.add(torch.tensor([9, 9, 9, 9]), [layer])
    assert cache.bytes == 128 and cache.longest(torch.tensor([5, 6]))[0] == 0
    assert cache.longest(torch.tensor([1, 2, 3, 4, 5]))[0] == 4


def test_fastest_is_bfloat16_only_where_the_cpu_multiplies_it(tmp_path):
    from graphctx.generation.loading import native_bf16, resolve_dtype

    cpuinfo = tmp_path / "cpuinfo"
    for flags, native in (("fpu avx512f avx512_bf16", True), ("fpu amx_bf16", True), ("fpu avx512f", False)):
        cpuinfo.write_text(f"processor : 0\nflags\t\t: {flags}\n")
        assert native_bf16(cpuinfo) is native
    assert native_bf16(tmp_path / "absent") is False
    here = torch.bfloat16 if native_bf16() else torch.float32
    assert resolve_dtype(GenerationSettings(dtype="fastest"), torch.device("cpu")) == here
    assert resolve_dtype(GenerationSettings(), torch.device("cpu")) == torch.float32


def test_static_cache_and_continuous_batching_exclude_each_other():
    with pytest.raises(ConfigError, match="static_cache needs backend: generate"):
        GenerationSettings(static_cache=True, backend="continuous")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_continuous_batching_gives_the_padded_batches_tokens_on_cuda(llama):
    """The same on the GPU in float32 (the GPU suite reports the bf16 7B shape's share of equal answers)."""
    model, _, prompts = llama
    model = model.to("cuda")
    try:
        padded = decode(model, prompts, "generate", [2])
        assert decode(model, prompts, "continuous", [2]) == padded
    finally:
        model.to("cpu")
