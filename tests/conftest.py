"""Shared fixtures: the real data beside the checkout, offline settings, a per-test cache folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from slurm_cluster import slurm_cluster  # noqa: F401 -- the fixture: here, so one cluster serves every module

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("WANDB_MODE", "offline")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # One intra-op thread per xdist worker (and per process a test starts): three workers on two cores, never
    # six OpenMP threads spinning for two cores.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# Fixtures that own one machine-wide thing: every test that uses one runs on the same xdist worker, so the
# thing is made once per run (the SLURM cluster; the local protocol run the SLURM one is compared to).
SINGLE_MACHINE_FIXTURES = frozenset({"slurm_cluster", "local_run"})
SINGLE_MACHINE_GROUP = "slurm"


def _uses_a_single_machine_fixture(item: pytest.Item) -> bool:
    return bool(SINGLE_MACHINE_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a module-scoped fixture (one built per worker that runs a test of the module)."""
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return any(defs and defs[-1].scope == "module" for defs in definitions.values())


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """xdist groups (``--dist loadgroup``), so each expensive fixture is built once per run: the tests of a
    single-machine fixture share one worker, and so do the tests of a module that share a module fixture (in
    the single-machine group when a test of the module is in it, so the module fixture is built once too).
    Then the longest first (``--no-loadscope-reorder`` keeps this order): the single-machine group, then the
    tests marked slow, so no long test starts when the others are nearly done."""
    single = {item.module.__name__ for item in items if _uses_a_single_machine_fixture(item)}
    for item in items:
        if _uses_a_single_machine_fixture(item):
            item.add_marker(pytest.mark.single_machine)
            item.add_marker(pytest.mark.xdist_group(SINGLE_MACHINE_GROUP))
        elif _uses_a_module_fixture(item):
            module = item.module.__name__
            item.add_marker(pytest.mark.xdist_group(SINGLE_MACHINE_GROUP if module in single else module))
    items.sort(key=_start_order)


def _start_order(item: pytest.Item) -> int:
    if any(mark.args == (SINGLE_MACHINE_GROUP,) for mark in item.iter_markers("xdist_group")):
        return 0
    return 1 if item.get_closest_marker("slow") else 2


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


@pytest.fixture(scope="session")
def cardano_rows(cardano_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """Every question/accepted-answer row of the cardano dump (all splits), cleaned as for training."""
    from graphctx.data import DatasetSettings, FilterSettings, load_qa_dataset

    settings = DatasetSettings(source=str(cardano_dir), workers=1, filters=FilterSettings(max_tokens=None))
    dataset = load_qa_dataset(settings, tmp_path_factory.mktemp("cardano-rows"))
    return [row for split in dataset.values() for row in split]


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


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """SmolLM2-135M-Instruct's byte-level BPE tokenizer, from the packaged GGUF (converted once into the
    graphctx cache, then read from there)."""
    from graphctx.model import ModelSpec, load_tokenizer

    return load_tokenizer(ModelSpec(source="smollm2-gguf"))


@pytest.fixture(scope="session")
def smollm2_folder() -> Path:
    """The packaged SmolLM2 GGUF converted to a model folder (once, in the default graphctx cache): a config
    naming it as ``model.spec.source`` builds its dataset in a fresh cache without converting again."""
    from graphctx.model import ModelSpec, resolve_source

    return Path(resolve_source(ModelSpec(source="smollm2-gguf")))


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny tensors: one intra-op thread avoids OpenMP hand-offs that dominate on a busy 2-core runner."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT (2 layers, width 32) with the packaged MiniLM's real WordPiece tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from graphctx.retrieval.embeddings import PACKAGED_MINILM, resolve_model_path

    folder = tmp_path_factory.mktemp("models") / "tiny-bert"
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(PACKAGED_MINILM))
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_t5(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random T5 (2 layers, width 32) with a real SentencePiece T5 tokenizer (the packaged Llama piece
    model), for the T5 scorers: AutoAIS's TRUE judge and MiniCheck's checker."""
    import shutil

    import torch
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    from graphctx.model.loading import packaged_llama_sentencepiece

    folder = tmp_path_factory.mktemp("models") / "tiny-t5"
    folder.mkdir()
    shutil.copy(packaged_llama_sentencepiece(), folder / "spiece.model")
    tokenizer = T5Tokenizer.from_pretrained(folder, model_max_length=512)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    with torch.random.fork_rng():
        torch.manual_seed(0)
        T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def kg_settings(shared_data: Path, tmp_path_factory: pytest.TempPathFactory):
    """The local KG backend on ``../shared/data/kg`` with one cache folder for the session, so its store
    (about 400k triples) is built once for every test that reads it."""
    from graphctx.knowledge.settings import KnowledgeSettings

    cache = tmp_path_factory.mktemp("kg-cache")
    return KnowledgeSettings(kg_dir=str(shared_data / "kg"), cache_dir=str(cache), token_budget=100_000)


@pytest.fixture(scope="session")
def reproduce_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache folder of every ``graphctx reproduce`` test (tests/reproduce_workspace.py)."""
    return tmp_path_factory.mktemp("reproduce-cache")


@pytest.fixture(scope="session")
def local_run(
    tmp_path_factory: pytest.TempPathFactory, cardano_dir: Path, tiny_bert: Path, reproduce_cache: Path
):
    """One local ``graphctx reproduce`` of the whole tiny protocol: the local test goes on from it, the SLURM
    test compares with it (a ``reproduce_workspace.LocalRun``)."""
    from reproduce_workspace import run_locally

    return run_locally(tmp_path_factory.mktemp("reproduce-local"), cardano_dir, tiny_bert, reproduce_cache)
