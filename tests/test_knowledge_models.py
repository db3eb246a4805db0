"""The neural extractors on tiny random models: REBEL (BART + REBEL tokens) and a prompted causal LM."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    BartConfig,
    BartForConditionalGeneration,
    PreTrainedTokenizerFast,
)

from graphctx.knowledge.llm import LLMExtractor
from graphctx.knowledge.rebel import REBEL_MARKERS, RebelExtractor
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.triplets import Triplet, TripletExtractor, build_extractor

WORDS = [
    "Docker",
    "runs",
    "on",
    "Linux",
    "operating",
    "system",
    "nginx",
    "depends",
    "libssl3",
    "the",
    "and",
    "is",
    "a",
    ".",
]


def _rebel_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {token: i for i, token in enumerate(["<s>", "<pad>", "</s>", "<unk>", *WORDS])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    tokenizer.add_special_tokens({"additional_special_tokens": list(REBEL_MARKERS)})  # as rebel-large does
    return tokenizer


def _tiny_bart(vocab_size: int) -> BartForConditionalGeneration:
    torch.manual_seed(0)
    config = BartConfig(
        vocab_size=vocab_size,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=64,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    )
    return BartForConditionalGeneration(config)


def test_rebel_extractor_keeps_special_tokens_through_generate_and_decode() -> None:
    tokenizer = _rebel_tokenizer()
    model = _tiny_bart(len(tokenizer))
    target = (
        "<triplet> Docker <subj> Linux <obj> operating system <triplet> nginx <subj> libssl3 <obj> depends"
    )
    target_ids = tokenizer(target, add_special_tokens=False)["input_ids"]

    def force_target(batch_id: int, prefix: torch.Tensor) -> list[int]:
        # the random model is steered to emit REBEL's linearisation; everything after it is real code
        produced = len(prefix) - 1  # after the decoder start token </s>
        if produced < 0:
            return list(range(len(tokenizer)))
        return [target_ids[produced]] if produced < len(target_ids) else [tokenizer.eos_token_id]

    extractor = RebelExtractor(
        model,
        tokenizer,
        max_source_tokens=8,
        max_new_tokens=len(target_ids) + 3,
        num_beams=2,
        batch_size=2,
        generate_kwargs={"prefix_allowed_tokens_fn": force_target},
    )
    assert isinstance(extractor, TripletExtractor)
    texts = ["Docker runs on Linux . nginx depends on libssl3 .", "the and is a ."]
    decoded = extractor.generate(["Docker runs on Linux ."])
    assert "<triplet>" in decoded[0] and "<subj>" in decoded[0]  # not stripped as special tokens
    assert extractor.extract(texts) == [
        [
            Triplet("Docker", "operating system", "Linux", "rebel"),
            Triplet("nginx", "depends", "libssl3", "rebel"),
        ],
        [
            Triplet("Docker", "operating system", "Linux", "rebel"),
            Triplet("nginx", "depends", "libssl3", "rebel"),
        ],
    ]


def test_rebel_reads_long_texts_in_windows() -> None:
    tokenizer = _rebel_tokenizer()
    extractor = RebelExtractor(_tiny_bart(len(tokenizer)), tokenizer, max_source_tokens=6, max_new_tokens=4)
    seen: list[str] = []
    extractor.generate = lambda windows: seen.extend(windows) or ["<s></s>"] * len(windows)  # type: ignore[method-assign]
    assert extractor.extract(["Docker runs on Linux . nginx depends on libssl3 .\n```\ncode block\n```"]) == [
        []
    ]
    assert seen == ["Docker runs on Linux .", "nginx depends on libssl3 ."]  # sentence windows, code dropped


def test_llm_extractor_runs_any_causal_lm(tmp_path: Path) -> None:
    from graphctx.model.loading import TINY_RANDOM, resolve_source
    from graphctx.model.settings import ModelSpec

    folder = resolve_source(ModelSpec(source=TINY_RANDOM, cache_dir=str(tmp_path)))  # tiny random Llama
    settings = KnowledgeSettings(extractor="llm", llm_model=folder, llm_max_new_tokens=6, batch_size=2)
    extractor = build_extractor(settings)
    assert isinstance(extractor, LLMExtractor) and extractor.tokenizer.padding_side == "left"
    texts = ["Docker runs on Linux.", "nginx depends on libssl3, which provides TLS.", "short"]
    prompt = extractor.prompt(texts[0])
    assert "(subject | relation | object)" in prompt and "Docker runs on Linux." in prompt
    replies = extractor.generate(texts)
    assert len(replies) == 3 and all(isinstance(r, str) for r in replies)
    # a random model writes no well-formed triplet; the parser must not invent one
    assert extractor.extract(texts) == [[] for _ in texts]
    with pytest.raises(ValueError, match="llm_model"):
        build_extractor(KnowledgeSettings(extractor="llm"))
