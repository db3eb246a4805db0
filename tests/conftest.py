"""Shared fixtures: the real data beside the checkout, offline settings, a per-test cache folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("WANDB_MODE", "offline")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` relative to the repository root (real Stack Exchange dump and KG sources)."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"real test data not found at {SHARED_DATA}: clone the repo beside shared/")
    return SHARED_DATA


@pytest.fixture(scope="session")
def cardano_dir(shared_data: Path) -> Path:
    """The cardano.stackexchange.com dump folder (Posts.xml, PostLinks.xml, Tags.xml)."""
    return shared_data / "stackexchange" / "cardano"


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    """A fresh cache folder for one test."""
    path = tmp_path / "cache"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def llama_tokenizer(tmp_path_factory: pytest.TempPathFactory):
    """A real Llama SentencePiece tokenizer (32k vocab) from the packaged ``mistral_common`` data files."""
    import shutil

    from transformers import LlamaTokenizer

    from graphctx.model.loading import packaged_llama_sentencepiece

    folder = tmp_path_factory.mktemp("llama_tokenizer")
    shutil.copy(packaged_llama_sentencepiece(), folder / "tokenizer.model")
    return LlamaTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny tensors: one intra-op thread avoids OpenMP hand-offs that dominate on a busy 2-core runner."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
