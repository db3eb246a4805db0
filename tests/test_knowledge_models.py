"""The neural extractors on tiny random models: REBEL (BART + REBEL tokens), a prompted causal LM (its own
or the lent generation model), and their union."""

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

from graphctx.knowledge.extractors import build_extractor, uses_generation_model
from graphctx.knowledge.llm import LLM_TRIPLET_PROMPT, GenerationModel, LLMExtractor
from graphctx.knowledge.rebel import REBEL_MARKERS, RebelExtractor
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.triplets import ExtractorUnion, Triplet, TripletExtractor
from graphctx.model.loading import TINY_RANDOM, load_tokenizer, resolve_source
from graphctx.model.settings import ModelSpec
from graphctx.model_use import model_identity

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
    folder = resolve_source(ModelSpec(source=TINY_RANDOM, cache_dir=str(tmp_path)))  # tiny random Llama
    settings = KnowledgeSettings(extractors=["llm"], llm_model=folder, llm_max_new_tokens=6, batch_size=2)
    extractor = build_extractor(settings)
    assert isinstance(extractor, LLMExtractor) and extractor.model.dtype == torch.float32  # fp32 on the CPU
    texts = ["Docker runs on Linux.", "nginx depends on libssl3, which provides TLS.", "short"]
    prompt = extractor.prompt(texts[0])
    assert "(subject | relation | object)" in prompt and "Docker runs on Linux." in prompt
    replies = extractor.generate(texts)
    assert len(replies) == 3 and all(isinstance(r, str) for r in replies)
    # a random model writes no well-formed triplet; the parser must not invent one
    assert extractor.extract(texts) == [[] for _ in texts]
    with pytest.raises(ValueError, match=r"knowledge\.llm_model"):  # "": the generation model, not passed
        build_extractor(KnowledgeSettings(extractors=["llm"]))


def _forcing(target_ids: list[int], start: int, eos: int):
    """``prefix_allowed_tokens_fn`` steering a random model to write ``target_ids`` after ``start`` tokens,
    then ``eos`` (``start``: the prompt width of a decoder-only model, 1 for BART's decoder start token)."""

    def allowed(batch_id: int, prefix: torch.Tensor) -> list[int]:
        produced = len(prefix) - start
        return [target_ids[produced]] if produced < len(target_ids) else [eos]

    return allowed


def _lent_tiny_llama(tmp_path: Path) -> GenerationModel:
    """The tiny random Llama loaded as a generation model would be, with its real SentencePiece tokenizer."""
    from transformers import AutoModelForCausalLM

    spec = ModelSpec(source=TINY_RANDOM, cache_dir=str(tmp_path))
    model = AutoModelForCausalLM.from_pretrained(resolve_source(spec)).eval()
    return GenerationModel(model, load_tokenizer(spec), source_identity=model_identity(TINY_RANDOM))


def test_union_of_rebel_and_llm_lists_a_shared_triplet_once(tmp_path: Path) -> None:
    text = "Docker runs on Linux . nginx depends on libssl3 ."
    rebel_tokenizer = _rebel_tokenizer()
    rebel_target = (
        "<triplet> Docker <subj> Linux <obj> operating system <triplet> nginx <subj> libssl3 <obj> depends"
    )
    rebel_ids = rebel_tokenizer(rebel_target, add_special_tokens=False)["input_ids"]
    rebel = RebelExtractor(
        _tiny_bart(len(rebel_tokenizer)),
        rebel_tokenizer,
        max_new_tokens=len(rebel_ids) + 2,
        num_beams=1,
        generate_kwargs={"prefix_allowed_tokens_fn": _forcing(rebel_ids, 1, rebel_tokenizer.eos_token_id)},
    )
    lent = _lent_tiny_llama(tmp_path)
    reply = "(Docker | operating system | Linux)\n(Linux | is a | kernel)"
    reply_ids = lent.tokenizer(reply, add_special_tokens=False)["input_ids"]
    prompt_width = len(lent.tokenizer(LLM_TRIPLET_PROMPT.format(text=text))["input_ids"])  # no chat template
    llm = LLMExtractor(
        lent.model,
        lent.tokenizer,
        max_new_tokens=len(reply_ids) + 2,
        generate_kwargs={
            "prefix_allowed_tokens_fn": _forcing(reply_ids, prompt_width, lent.tokenizer.eos_token_id)
        },
    )
    assert llm.extract([text]) == [
        [Triplet("Docker", "operating system", "Linux", "llm"), Triplet("Linux", "is a", "kernel", "llm")]
    ]  # the real reply of the steered model, parsed

    union = ExtractorUnion([rebel, llm])
    assert isinstance(union, TripletExtractor) and union.name == "rebel+llm"
    assert union.extract([text]) == [
        [
            Triplet("Docker", "operating system", "Linux", "rebel+llm"),  # both found it: listed once
            Triplet("nginx", "depends", "libssl3", "rebel"),
            Triplet("Linux", "is a", "kernel", "llm"),
        ]
    ]
    assert union.extract([]) == []


def test_build_extractor_lends_the_generation_model_to_the_llm_extractor(tmp_path: Path) -> None:
    rebel_folder = tmp_path / "rebel"
    tokenizer = _rebel_tokenizer()
    _tiny_bart(len(tokenizer)).save_pretrained(rebel_folder)
    tokenizer.save_pretrained(rebel_folder)
    lent = _lent_tiny_llama(tmp_path)
    settings = KnowledgeSettings(
        extractors=["rebel", "llm"],
        rebel_model=str(rebel_folder),
        rebel_max_new_tokens=4,
        llm_max_new_tokens=4,
    )
    assert uses_generation_model(settings)
    union = build_extractor(settings, lent)
    assert isinstance(union, ExtractorUnion) and union.name == "rebel+llm"
    rebel, llm = union.extractors
    assert isinstance(rebel, RebelExtractor) and isinstance(llm, LLMExtractor)
    assert llm.model is lent.model and llm.tokenizer is lent.tokenizer  # no second copy
    union.extract(["Docker runs on Linux."])
    assert lent.tokenizer.padding_side == "right"  # the lent tokenizer is not changed


def test_the_lent_models_cache_key_stays_when_its_converted_folder_moves(tmp_path: Path) -> None:
    """The enhanced-context key names the lent generation model by what it is, not where its converted
    folder lies: moving the cache (and the folder in it) keeps every cached context."""
    from graphctx.pipeline.answerer import LoadedModels
    from graphctx.pipeline.config_file import load_config

    tiny = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"

    def lent(cache: Path) -> GenerationModel:
        config = load_config(tiny, ["--model.spec.source", TINY_RANDOM, "--cache_dir", str(cache)])
        return LoadedModels(config, load_tokenizer(config.model.spec)).load("base")

    first, moved = tmp_path / "first", tmp_path / "moved"
    before = lent(first)
    assert Path(before.model.name_or_path).is_relative_to(first)
    first.rename(moved)
    after = lent(moved)
    assert Path(after.model.name_or_path).is_relative_to(moved)  # read from its new place
    assert after.identity == before.identity and str(tmp_path) not in after.identity
