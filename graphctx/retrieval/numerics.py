"""Where retrieval's numbers are computed, and what of that changes them: device, dtypes, CPU threads.

Embeddings and scores from the same model and texts differ in their last bits with the device (CUDA
kernels are not the CPU's), the embedding dtype (bfloat16 on CUDA under ``auto``) and, on the CPU, the
thread count (MKL's AVX-512 GEMM rounds otherwise for one thread than for two). :func:`numerics` names
those, for cache keys and fingerprints; :func:`pinned_threads` fixes the CPU thread count of a call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from graphctx.retrieval.settings import RetrievalSettings


def resolve_device(settings: RetrievalSettings) -> torch.device:
    """``settings.device`` with ``auto`` resolved to CUDA when available."""
    if settings.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(settings.device)


def embedding_dtype(settings: RetrievalSettings, device: torch.device) -> str:
    """The embedding model's weights dtype: ``auto`` is bfloat16 on CUDA and float32 on the CPU."""
    if settings.embedding_dtype == "auto":
        return "bfloat16" if device.type == "cuda" else "float32"
    return settings.embedding_dtype


def numerics(settings: RetrievalSettings, device: torch.device | None = None) -> dict[str, object]:
    """What, besides the model, the texts and the graph settings, changes retrieval's numbers: the device
    type, the embedding dtype and, on the CPU, :attr:`RetrievalSettings.cpu_threads`."""
    device = device or resolve_device(settings)
    threads = settings.cpu_threads if device.type == "cpu" else None
    dtype = embedding_dtype(settings, device)
    return {"device": device.type, "embedding_dtype": dtype, "cpu_threads": threads}


@contextlib.contextmanager
def pinned_threads(settings: RetrievalSettings, device: torch.device | str) -> Iterator[None]:
    """Run the block with ``settings.cpu_threads`` intra-op threads when ``device`` is the CPU (restored
    afterwards); on CUDA nothing changes."""
    if torch.device(device).type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(settings.cpu_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
