"""graphctx's SentenceEncoder gives sentence-transformers' ``encode(..., normalize_embeddings=True)``:
on the packaged MiniLM (mean pooling) with real cardano questions, and on tiny random BERTs saved by
sentence-transformers itself with cls / max / lasttoken pooling, and on a plain transformers folder (mean
pooling, as sentence-transformers builds for one); unsupported layouts are one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import Dense, Normalize, Transformer
from sentence_transformers.sentence_transformer.modules import Pooling
from transformers import AutoTokenizer, BertConfig, BertModel

from graphctx.errors import ConfigError
from graphctx.retrieval.embeddings import PACKAGED_MINILM, encode, load_encoder, resolve_model_path
from graphctx.retrieval.encoder import SentenceEncoder

MINILM = resolve_model_path(PACKAGED_MINILM)
ATOL = 1e-5


def reference(folder: str | Path, texts: list[str], batch_size: int = 16, **changes) -> torch.Tensor:
    model = SentenceTransformer(str(folder), device="cpu")
    for name, value in changes.items():
        setattr(model, name, value)
    return model.encode(texts, batch_size=batch_size, convert_to_tensor=True, normalize_embeddings=True)


@pytest.fixture(scope="module")
def texts(cardano_rows: list[dict]) -> list[str]:
    """40 cardano questions: the 8 longest (beyond MiniLM's 256 tokens) and 32 others of every length."""
    questions = sorted((row["question"] for row in cardano_rows), key=len)
    return questions[-8:] + questions[:: max(1, len(questions) // 32)][:32]


@pytest.fixture(scope="module")
def minilm() -> SentenceEncoder:
    return SentenceEncoder.load(MINILM)


def test_packaged_minilm_equals_sentence_transformers(minilm: SentenceEncoder, texts: list[str]) -> None:
    assert minilm.pooling == "mean" and minilm.max_length == 256
    lengths = [len(ids) for ids in minilm.tokenizer(texts)["input_ids"]]
    assert max(lengths) > 256 > min(lengths)  # some are truncated
    ours = minilm.encode(texts, batch_size=16)
    assert ours.dtype == torch.float32 and ours.shape == (len(texts), 384)
    torch.testing.assert_close(ours, reference(MINILM, texts), atol=ATOL, rtol=0)
    torch.testing.assert_close(minilm.encode(texts, batch_size=1), ours, atol=ATOL, rtol=0)  # batching
    torch.testing.assert_close(minilm.encode(texts[::-1], batch_size=7), ours.flip(0), atol=ATOL, rtol=0)


def test_max_seq_length_override_and_instruction(texts: list[str]) -> None:
    model = load_encoder(PACKAGED_MINILM, device="cpu", max_seq_length=32)
    assert model.max_length == 32
    long = texts[:4]
    expected = reference(MINILM, ["Represent this: " + text for text in long], max_seq_length=32)
    instructed = encode(model, long, instruction="Represent this: ")
    torch.testing.assert_close(instructed, expected, atol=ATOL, rtol=0)
    pool = encode(model, long, instruction="")
    torch.testing.assert_close(pool, reference(MINILM, long, max_seq_length=32), atol=ATOL, rtol=0)
    assert not torch.allclose(pool, reference(MINILM, long), atol=1e-3)  # the override truncates


def tiny_bert(folder: Path) -> Path:
    """A random 2-layer BERT (hidden 32) with MiniLM's tokenizer, as a transformers folder."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    BertModel(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(MINILM).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.mark.parametrize(
    ("mode", "padding_side", "lower"),
    [("cls", "right", True), ("cls", "left", False), ("max", "right", False), ("lasttoken", "left", False)],
)
def test_tiny_models_equal_sentence_transformers(bert_folder, tmp_path, texts, mode, padding_side, lower):
    """cls + Normalize is bge-large-en's layout; left padding moves the first/last real token."""
    transformer = Transformer(str(bert_folder), max_seq_length=64, do_lower_case=lower)
    transformer.tokenizer.padding_side = padding_side
    modules = [transformer, Pooling(32, pooling_mode=mode), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(tmp_path / "st"))
    ours = SentenceEncoder.load(str(tmp_path / "st"))
    assert (ours.pooling, ours.max_length, ours.tokenizer.padding_side) == (mode, 64, padding_side)
    shouting = [text.upper() for text in texts[8:20]]
    sample = texts[:12] + shouting
    batch_size = 5 if padding_side == "right" else 16  # left padding shifts positions with the batch
    expected = reference(tmp_path / "st", sample, batch_size=16)
    torch.testing.assert_close(ours.encode(sample, batch_size), expected, atol=ATOL, rtol=0)
    if lower:  # do_lower_case: upper-case texts embed as their lower-case originals
        torch.testing.assert_close(ours.encode(shouting, 5), ours.encode(texts[8:20], 5), atol=ATOL, rtol=0)


def test_unsupported_module_is_one_line(bert_folder, tmp_path) -> None:
    modules = [Transformer(str(bert_folder)), Pooling(32), Dense(32, 16)]
    SentenceTransformer(modules=modules, device="cpu").save(str(tmp_path / "dense"))
    with pytest.raises(ConfigError) as error:
        SentenceEncoder.load(str(tmp_path / "dense"))
    message = str(error.value)
    assert "\n" not in message
    assert str(tmp_path / "dense" / "modules.json") in message and "Dense" in message


def test_missing_model_names_the_setting(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"^retrieval\.embedding_model='graphctx-tests/no-such") as e:
        load_encoder("graphctx-tests/no-such-model", device="cpu")
    assert "\n" not in str(e.value)


def test_plain_transformers_folder_gets_mean_pooling_as_in_sentence_transformers(bert_folder, texts) -> None:
    """No modules.json: sentence-transformers builds Transformer + mean Pooling; so does the encoder."""
    ours = SentenceEncoder.load(str(bert_folder))
    assert ours.pooling == "mean" and ours.max_length == 512  # the tokenizer's limit, within the positions
    expected = reference(bert_folder, texts[:12], batch_size=5)
    torch.testing.assert_close(ours.encode(texts[:12], 5), expected, atol=ATOL, rtol=0)
