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


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``device`` with ``auto`` resolved to CUDA when available.

    Examples:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def embedding_dtype(dtype: str, device: torch.device) -> str:
    """The embedding model's weights dtype: ``auto`` is bfloat16 on CUDA and float32 on the CPU.

    Examples:
        >>> embedding_dtype("auto", torch.device("cuda")), embedding_dtype("auto", torch.device("cpu"))
        ('bfloat16', 'float32')
    """
    if dtype == "auto":
        return "bfloat16" if device.type == "cuda" else "float32"
    return dtype


def similarity_dtype(dtype: str | torch.dtype, device: torch.device) -> torch.dtype:
    """The dtype of the matrix products that find edges: ``auto`` is bfloat16 on CUDA and float32 on the CPU.

    Examples:
        >>> similarity_dtype("auto", torch.device("cpu")), similarity_dtype("float64", torch.device("cuda"))
        (torch.float32, torch.float64)
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, dtype)


def numerics(device: torch.device, embedding_dtype: str, cpu_threads: int) -> dict[str, object]:
    """What, besides the model, the texts and the graph settings, changes retrieval's numbers: the device
    type, the (resolved) embedding dtype and, on the CPU only, the thread count.

    Examples:
        >>> numerics(torch.device("cuda", 1), "bfloat16", cpu_threads=4)
        {'device': 'cuda', 'embedding_dtype': 'bfloat16', 'cpu_threads': None}
    """
    threads = cpu_threads if device.type == "cpu" else None
    return {"device": device.type, "embedding_dtype": embedding_dtype, "cpu_threads": threads}


@contextlib.contextmanager
def pinned_threads(cpu_threads: int, device: torch.device | str) -> Iterator[None]:
    """Run the block with ``cpu_threads`` intra-op threads when ``device`` is the CPU (restored
    afterwards); on CUDA nothing changes.

    Examples:
        >>> before = torch.get_num_threads()
        >>> with pinned_threads(1, "cpu"):
        ...     torch.get_num_threads()
        1
        >>> torch.get_num_threads() == before
        True
    """
    if torch.device(device).type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(cpu_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
