"""The smallest real reproduction: configs/tiny.yaml on a tiny random Llama, one training step, two recent
questions answered by one variant, for the ``graphctx reproduce`` tests (local and SLURM). The tests share
one cache folder (content-addressed: the dataset, the converted models), as runs of one user do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tiny_config import TINY, tiny_split

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def reproduce_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache folder of every reproduce test."""
    return tmp_path_factory.mktemp("reproduce-cache")


def reproduce_config(
    root: Path, cardano_dir: Path, tiny_bert: Path, cache: Path, kg_dir: Path | None = None
) -> Path:
    """The config ``root/tiny.yaml``: every output under ``root`` (``trainer.default_root_dir``), W&B off, no
    validation, one optimiser step, the tiny BERT embedding a pool of 43 recent questions, GraphContextGen
    evaluated on 2 questions with tiny scorers, the KG read from ``kg_dir`` (default: the shared one)."""
    config = yaml.safe_load(TINY.read_text())
    trainer = config["trainer"]
    trainer.update(
        default_root_dir=str(root / "run"),
        max_steps=1,
        val_check_interval=None,
        limit_val_batches=0,
        enable_progress_bar=False,
        logger=[{"class_path": "lightning.pytorch.loggers.CSVLogger"}],
    )
    config["cache_dir"] = str(cache)
    config["model"]["spec"].update(source="tiny-random", quantization="none")
    config["model"]["lora"].update(r=4, target_modules=["q_proj", "v_proj"])
    config["data"]["dataset"] = {
        "source": str(cardano_dir),
        "split": tiny_split(train_start="2021-08-20", test_end="2021-11-01"),  # 43 pool, 32 test questions
        "workers": 1,  # cleaning in the stage's own process: no worker start-up for a 3 MB dump
    }
    config["retrieval"].update(embedding_model=str(tiny_bert), threshold=0.95)
    config["data"].update(max_length=256)
    config["knowledge"].update(kg_dir=str(kg_dir or cardano_dir.parents[1] / "kg"), token_budget=160)
    config["generation"]["max_new_tokens"] = 8
    evaluation = config["evaluation"]
    evaluation.update(
        variants=["GraphContextGen"],
        limit=2,
        wandb_project=None,
        callback_every_n_validations=0,
        bootstrap_samples=50,
        permutation_samples=50,
    )
    evaluation["metrics"] = {
        "bertscore": {"model": str(tiny_bert)},
        "autoais": {"model": "tiny-random"},
        "facts": {"fact_method": "triplets", "entity_method": "spacy"},
    }
    path = root / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def environment(**extra: str) -> dict[str, str]:
    """This test run's environment (the worktree first on PYTHONPATH, offline) plus ``extra``."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "WANDB_MODE": "offline", **extra}


def reproduce(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``graphctx reproduce ARGS`` run from the repository root, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "graphctx.cli", "reproduce", *args],
        cwd=REPO_ROOT,
        env=env or environment(),
        capture_output=True,
        text=True,
    )
