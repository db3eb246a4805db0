"""Faults lose nothing: a process SIGKILLed while writing a cache entry leaves no entry that can be read back,
and a diverging loss stops training before the bad step reaches the weights or a checkpoint.

(``kill -9`` of evaluate.py mid-run is tested in tests/test_evaluate_resume.py; SLURM preemption in
tests/test_slurm.py.)
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
KILLER = Path(__file__).with_name("kill_during_write.py")

pytestmark = pytest.mark.slow


def entries(folder: Path) -> list[Path]:
    """Published cache entries of one kind (temporaries start with a dot)."""
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []


def temporaries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.startswith(".")) if folder.is_dir() else []


def read_back(artefact: str, cache: Path, shared: Path) -> dict:
    """Load (or rebuild) the artefact in this process, as the next run would, and summarise it."""
    if artefact == "dataset":
        from graphctx.data.build import load_qa_dataset
        from graphctx.data.settings import DatasetSettings, FilterSettings

        settings = DatasetSettings(source=str(shared / "stackexchange" / "cardano"))
        settings.filters = FilterSettings(max_tokens=None)
        qa = load_qa_dataset(settings, cache)
        return {split: sorted(qa[split]["id"]) for split in qa}
    if artefact in ("embeddings", "index"):
        from kill_during_write import POOL_TEXTS

        from graphctx.retrieval.builders import build_embeddings
        from graphctx.retrieval.index import build_index
        from graphctx.retrieval.settings import RetrievalSettings

        settings = RetrievalSettings(device="cpu", threshold=0.3)
        if artefact == "embeddings":
            return {"embeddings": build_embeddings(POOL_TEXTS, settings, cache_dir=cache)}
        index = build_index(list(range(len(POOL_TEXTS))), POOL_TEXTS, settings, cache_dir=cache)
        return {"ids": index.ids.tolist(), "edges": index.graph.edge_index.tolist(), "stats": index.stats}
    from graphctx.knowledge.settings import KnowledgeSettings
    from graphctx.knowledge.store import LocalKnowledgeGraph, build_store

    settings = KnowledgeSettings(kg_dir=str(shared / "kg"), cache_dir=str(cache))
    folder = build_store(settings)
    LocalKnowledgeGraph(folder)  # opens the RocksDB store
    stats = json.loads((folder / "stats.json").read_text())
    return {
        "triples": stats["triples"],
        "gazetteer": len(json.loads((folder / "gazetteer.json").read_text())),
    }


@pytest.fixture(scope="module")
def clean_cache(tmp_path_factory) -> Path:
    """One cache, never interrupted, holding the reference of each artefact."""
    return tmp_path_factory.mktemp("clean-cache")


@pytest.mark.parametrize(
    ("artefact", "moment"),
    [
        ("dataset", "open:summary.json"),  # split Arrow files written, summary not yet
        ("dataset", "publish"),
        ("embeddings", "publish"),  # the tensor file complete under its temporary name
        ("index", "open:stats.json"),  # ids, embeddings and question graph written, stats not yet
        ("kg-store", "open:gazetteer.json"),  # RocksDB store loaded, gazetteer and stats not yet
    ],
)
def test_sigkill_during_a_cache_write_never_leaves_a_readable_partial_entry(
    artefact, moment, shared_data, tmp_path, clean_cache
) -> None:
    from kill_during_write import KIND_FOLDER

    killed_cache = tmp_path / "killed"
    run = subprocess.run(
        [sys.executable, str(KILLER), artefact, moment, str(killed_cache), str(shared_data)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert run.returncode == -signal.SIGKILL, run.stderr[-2000:]
    assert "killing at" in run.stderr
    kind = killed_cache / KIND_FOLDER[artefact]
    # The kill left a temporary with bytes in it, and no published entry.
    leftovers = temporaries(kind)
    assert leftovers and any(p.is_file() and p.stat().st_size for t in leftovers for p in [t, *t.rglob("*")])
    assert entries(kind) == []

    # The next run ignores the debris, rebuilds, and reads back exactly what a clean cache gives.
    recovered = read_back(artefact, killed_cache, shared_data)
    assert len(entries(kind)) == 1
    expected = read_back(artefact, clean_cache, shared_data)
    for name, value in expected.items():
        if isinstance(value, torch.Tensor):
            torch.testing.assert_close(recovered[name], value)
        else:
            assert recovered[name] == value, name


def diverging_config(tmp_path: Path, cardano_dir: Path) -> tuple[Path, Path]:
    """configs/tiny.yaml on a tiny random Llama with a learning rate that makes the loss blow up."""
    config = yaml.safe_load((REPO_ROOT / "configs" / "tiny.yaml").read_text())
    root = tmp_path / "run"
    trainer = config["trainer"]
    trainer.update(default_root_dir=str(root), max_steps=8, limit_val_batches=0, val_check_interval=None)
    trainer.update(enable_progress_bar=False, gradient_clip_val=None, logger=False)
    trainer["callbacks"][0]["init_args"].update(dirpath=str(root / "checkpoints"), every_n_train_steps=1)
    config["cache_dir"] = str(tmp_path / "cache")
    config["model"]["spec"].update(source="tiny-random", quantization="none")
    # Warm-up from 0 to 1e30 over the first steps: the first updates are sane, a later one overflows.
    config["model"]["optimizer"].update(lr=1e30, warmup_ratio=0.5, betas=[0.0, 0.999])
    config["data"]["dataset"]["source"] = str(cardano_dir)
    config["data"].update(max_length=128)
    path = tmp_path / "diverging.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, root


def test_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(tmp_path, cardano_dir, capsys) -> None:
    from train import main as train_main

    config, root = diverging_config(tmp_path, cardano_dir)
    assert train_main(["--config", str(config)]) == 1
    error = capsys.readouterr().err
    assert "training loss is not finite" in error and "stopped before the update" in error, error[-2000:]
    last = root / "checkpoints" / "last.ckpt"
    assert f"last good checkpoint is {last}" in error
    checkpoint = torch.load(last, weights_only=True, map_location="cpu")
    assert 0 < checkpoint["global_step"] < 8
    assert f"at global step {checkpoint['global_step']}" in error
    assert all(torch.isfinite(tensor).all() for tensor in checkpoint["state_dict"].values())
    # Training stopped: no adapter was exported from the diverged weights.
    assert not (root / "adapter").exists()


def _publish_rounds(rank: int, barrier, folder: Path, rounds: int) -> None:
    """One of several processes building the same cache entries at the same moment, round after round;
    each then reads the entry back whole (its two files from one writer)."""
    from graphctx.cache import publish_once

    for round_ in range(rounds):
        target = folder / f"entry-{round_}"
        barrier.wait(timeout=60)  # a rank that failed breaks the barrier for the others
        with publish_once(target) as tmp:
            tmp.mkdir()
            for name in ("a", "b"):
                (tmp / name).write_text(str(rank) * 10_000)
        assert (target / "a").read_text() == (target / "b").read_text()


def test_ranks_building_one_cache_entry_at_once_all_succeed_and_read_it_whole(tmp_path) -> None:
    """DDP ranks (or nodes sharing the cache) build a dataset, KG store or model entry at the same moment:
    the first published entry stays and every process goes on with it (replacing a folder under the others
    crashed a rank of a 2-process training run in CI: 'Directory not empty')."""
    import multiprocessing

    from tests.forked_ranks import run_forked_ranks

    barrier = multiprocessing.get_context("fork").Barrier(4)
    rank_args = [(rank, barrier, tmp_path, 40) for rank in range(4)]
    assert run_forked_ranks(_publish_rounds, rank_args, timeout_s=120) == [0, 0, 0, 0]
    leftovers = sorted(p.name for p in tmp_path.iterdir())  # no temporary folder stays behind
    assert leftovers == sorted(f"entry-{r}" for r in range(40))
