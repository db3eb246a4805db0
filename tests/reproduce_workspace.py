"""The smallest real reproduction: configs/tiny.yaml on a tiny random Llama, one training step, two recent
questions answered by one variant, for the ``graphctx reproduce`` tests (local and SLURM). The tests share
one cache folder (content-addressed: the dataset, the converted models), as runs of one user do, and one
local run of the whole protocol (:func:`run_locally`): the local test goes on from it, the SLURM test
compares its jobs' outputs with it. Both are session fixtures of tests/conftest.py (``reproduce_cache``,
``local_run``): a fixture imported into two test modules would be made once per module."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from tiny_config import TINY, tiny_scorers, tiny_split

REPO_ROOT = Path(__file__).resolve().parents[1]


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
    evaluation["metrics"] = tiny_scorers(str(tiny_bert))
    path = root / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


OUTPUTS = (
    "run/eval/results.csv",
    "run/eval/predictions/GraphContextGen.jsonl",
    "state/cardano/data.txt",
    "state/cardano/index.json",
    "state/cardano/human",
    "state/beside_the_paper.md",
)
"""What the stages of a reproduction in a folder (its config beside ``run/`` and ``state/``) make, as far as
it is the same wherever the folder is: the evaluation's results and answers, the data summary, the index
summary, the human-evaluation export and the tables (which name the results file: the folder is left out)."""


def outputs(folder: Path) -> dict[str, str]:
    """Each file of :data:`OUTPUTS` under ``folder`` (a folder: each file in it) → its text, with ``folder``
    itself written as ``ROOT``."""
    found: dict[str, str] = {}
    for name in OUTPUTS:
        path = folder / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            found[str(file.relative_to(folder))] = file.read_text().replace(str(folder), "ROOT")
    return found


@dataclass(frozen=True)
class LocalRun:
    """The first local ``graphctx reproduce`` of the whole protocol: its config, state folder, stdout and
    stderr, and its :func:`outputs` as they were when it ended."""

    config: Path
    state: Path
    stdout: str
    stderr: str
    outputs: dict[str, str]


def run_locally(folder: Path, cardano_dir: Path, tiny_bert: Path, cache: Path) -> LocalRun:
    """``graphctx reproduce`` of the whole tiny protocol here, in ``folder`` (about 45 s on 2 cores)."""
    config, state = reproduce_config(folder, cardano_dir, tiny_bert, cache), folder / "state"
    done = reproduce("--config", str(config), "--state", str(state), "--human-questions", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    return LocalRun(config, state, done.stdout, done.stderr, outputs(folder))


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
