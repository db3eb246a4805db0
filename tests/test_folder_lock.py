"""One run per output folder: a second evaluate.py or train.py on a folder another live process holds is
refused in one line naming its pid; a lock whose holder was killed is taken over. Real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import lightning  # noqa: F401 - imported uncaptured: its logger's handler binds the sys.stderr of first import
import pytest
from evaluation_workspace import write_workspace

import evaluate
from graphctx.folder_lock import LOCK_FILE, FolderLock, holding

REPO = Path(__file__).resolve().parents[1]
HOLD = "import sys, time\nfrom graphctx.folder_lock import holding\nwith holding(sys.argv[1], 'a test'):\n"
HOLD += "    print('held', flush=True)\n    time.sleep(120)\n"


@contextlib.contextmanager
def held(folder: Path) -> Iterator[subprocess.Popen]:
    """Another process holding ``folder``'s lock for the block (killed afterwards)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert process.stdout.readline().strip() == "held"
        yield process
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def holder(tmp_path):
    """A process holding ``tmp_path / 'run'``'s lock; yields (folder, process)."""
    folder = tmp_path / "run"
    with held(folder) as process:
        yield folder, process


def test_a_held_folder_is_refused_naming_the_holder_and_taken_over_once_it_dies(holder):
    folder, process = holder
    lock = FolderLock(folder, "another evaluate.py run")
    assert not lock.acquire() and lock.holder == str(process.pid)
    assert str(lock.refusal()) == (
        f"{folder}: another evaluate.py run is already using this folder (pid {process.pid}); wait for it "
        "to end or choose another folder (a lock left by a process that died is taken over by itself)"
    )
    os.kill(process.pid, signal.SIGKILL)  # as a preempted job or kill -9 ends it: the kernel frees the lock
    process.wait()
    with holding(folder, "this run"):
        assert (folder / LOCK_FILE).read_text().strip() == str(os.getpid())
    assert folder.is_dir()  # the killed holder's folder stays (it was not created by this lock)


def test_a_lock_on_a_new_folder_leaves_nothing_behind_when_nothing_was_written(tmp_path):
    with holding(tmp_path / "new", "a run"):
        assert (tmp_path / "new" / LOCK_FILE).is_file()
    assert not (tmp_path / "new").exists()


def test_evaluate_on_a_folder_another_run_holds_is_one_error_line(holder, cardano_dir, tiny_bert, capfd):
    folder, process = holder
    evaluation = {"output_dir": str(folder), "limit": 1, "variants": ["ZeroShot"]}
    config = write_workspace(folder.parent, cardano_dir, tiny_bert, "eval.yaml", evaluation)
    before = sorted(p.name for p in folder.iterdir())
    assert evaluate.main(["--config", str(config)]) == 1
    lines = capfd.readouterr().err.strip().splitlines()
    assert lines[-1] == (
        f"error: {folder}: another evaluate.py run is already using this folder (pid {process.pid}); wait "
        "for it to end or choose another folder (a lock left by a process that died is taken over by itself)"
    )
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written beside the holder's


def test_only_the_launching_rank_takes_the_training_roots_lock(monkeypatch):
    from train import launching_rank

    for name in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    assert launching_rank()
    monkeypatch.setenv("LOCAL_RANK", "1")  # a rank Lightning started: it shares rank 0's root
    assert not launching_rank()
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("SLURM_PROCID", "2")  # task 2 of an srun
    assert not launching_rank()
