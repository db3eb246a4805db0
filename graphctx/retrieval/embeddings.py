"""Sentence embeddings of pool questions and queries, L2-normalised, cached on disk by model + texts.

Pool questions and queries are embedded alike (the same instruction, if any, before each), so the question
graph and the query edges compare one embedding of each question: the paper's symmetric similarity."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from graphctx.cache import atomic_path, cache_root, fingerprint, read_entry
from graphctx.retrieval.encoder import SentenceEncoder
from graphctx.retrieval.numerics import embedding_dtype, numerics, pinned_threads, resolve_device
from graphctx.retrieval.settings import PACKAGED_MINILM as PACKAGED_MINILM
from graphctx.retrieval.settings import resolve_model_path


def load_encoder(
    name: str,
    *,
    device: str | torch.device = "auto",
    dtype: str = "auto",
    max_seq_length: int | None = None,
) -> SentenceEncoder:
    """The sentence-transformers model ``name`` (:func:`resolve_model_path`) on ``device`` with weights in
    ``dtype`` (``auto``: bfloat16 on CUDA, float32 on the CPU); ``max_seq_length`` caps the tokens.

    Examples:
        >>> model = load_encoder(PACKAGED_MINILM, device="cpu")
        >>> model.device, model.max_length
        (device(type='cpu'), 256)
    """
    device = resolve_device(device)
    return SentenceEncoder.load(
        resolve_model_path(name),
        device=device,
        dtype=getattr(torch, embedding_dtype(dtype, device)),
        max_seq_length=max_seq_length,
    )


def encode(
    model: SentenceEncoder,
    texts: Sequence[str],
    *,
    instruction: str = "",
    batch_size: int = 64,
    cpu_threads: int = 1,
    show_progress_bar: bool = False,
) -> Tensor:
    """Float32 L2-normalised embeddings [len(texts), d] on the model's device of ``instruction + text``
    for every text (pool question or query alike), ``batch_size`` texts per forward pass, on
    ``cpu_threads`` threads on the CPU.

    Examples:
        >>> model = load_encoder(PACKAGED_MINILM, device="cpu")
        >>> vectors = encode(model, ["How do I stake ADA?", "Staking ADA"], instruction="Q: ")
        >>> vectors.shape, round(float(vectors[0].norm()), 4)
        (torch.Size([2, 384]), 1.0)
    """
    with pinned_threads(cpu_threads, model.device):
        return model.encode(
            [instruction + text for text in texts], batch_size=batch_size, show_progress_bar=show_progress_bar
        )


def texts_digest(texts: Sequence[str]) -> str:
    """SHA-256 over the texts, each length-prefixed so that boundaries count.

    Examples:
        >>> texts_digest(["ab", "c"]) == texts_digest(["a", "bc"])
        False
    """
    digest = hashlib.sha256()
    for text in texts:
        blob = text.encode()
        digest.update(len(blob).to_bytes(8, "little"))
        digest.update(blob)
    return digest.hexdigest()


def embedding_cache_path(
    texts: Sequence[str],
    model_name: str,
    *,
    instruction: str = "",
    max_seq_length: int | None = None,
    device: str | torch.device = "auto",
    dtype: str = "auto",
    cpu_threads: int = 1,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """``<cache>/embeddings/<key>.pt`` with the key hashing the model name, instruction, length limit,
    texts and :func:`~graphctx.retrieval.numerics.numerics` (device type, resolved dtype, CPU threads).

    Examples:
        >>> path = embedding_cache_path(["a question"], PACKAGED_MINILM, device="cpu", cache_dir="cache")
        >>> path.parent.as_posix(), path.suffix
        ('cache/embeddings', '.pt')
    """
    device = resolve_device(device)
    key = fingerprint(
        model_name,
        instruction,
        max_seq_length,
        texts_digest(texts),
        numerics(device, embedding_dtype(dtype, device), cpu_threads),
    )
    return cache_root(cache_dir) / "embeddings" / f"{key}.pt"


def _read_embeddings(path: Path, rows: int) -> Tensor:
    """A cached embedding matrix, checked to hold ``rows`` rows."""
    embeddings = torch.load(path, weights_only=True)
    if not isinstance(embeddings, Tensor) or embeddings.dim() != 2 or embeddings.shape[0] != rows:
        raise ValueError(f"{path}: expected a [{rows}, d] embedding matrix")
    return embeddings


def embed_texts(
    texts: Sequence[str],
    model_name: str,
    *,
    instruction: str = "",
    max_seq_length: int | None = None,
    batch_size: int = 64,
    device: str | torch.device = "auto",
    dtype: str = "auto",
    cpu_threads: int = 1,
    cache_dir: str | os.PathLike[str] | None = None,
    model: SentenceEncoder | None = None,
) -> Tensor:
    """Cached :func:`encode`: reads :func:`embedding_cache_path`, else computes and writes it (float32, on
    the CPU). Only a miss loads a model (``model``, else :func:`load_encoder` of ``model_name``); an entry
    that does not read back as one embedding per text is moved aside and rebuilt.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as cache:
        ...     first = embed_texts(["Staking ADA"], PACKAGED_MINILM, device="cpu", cache_dir=cache)
        ...     again = embed_texts(["Staking ADA"], PACKAGED_MINILM, device="cpu", cache_dir=cache)
        >>> first.shape, torch.equal(first, again)
        (torch.Size([1, 384]), True)
    """
    path = embedding_cache_path(
        texts,
        model_name,
        instruction=instruction,
        max_seq_length=max_seq_length,
        device=device,
        dtype=dtype,
        cpu_threads=cpu_threads,
        cache_dir=cache_dir,
    )
    cached = read_entry(path, lambda entry: _read_embeddings(entry, len(texts)))
    if cached is not None:
        return cached
    model = model or load_encoder(model_name, device=device, dtype=dtype, max_seq_length=max_seq_length)
    embeddings = encode(
        model,
        texts,
        instruction=instruction,
        batch_size=batch_size,
        cpu_threads=cpu_threads,
        show_progress_bar=len(texts) > 1000,
    ).cpu()
    with atomic_path(path) as tmp:
        torch.save(embeddings, tmp)
    return embeddings
