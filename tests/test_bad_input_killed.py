"""Bad input, round four: ``kill -9`` during ``graphctx data`` on an archive leaves the build's temporary
folder with its scratch SQLite copy of the dump; the next start removes it (its build holds no live lock),
and a live build's is never touched (issue 34)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from test_data_archive import make_7z
from test_retrieval_eval import small_config, write_site

from graphctx.cli import main
from graphctx.data.build import remove_dead_builds

REPO = Path(__file__).resolve().parents[1]
KILL_AT_SQLITE = """
import os, signal, sys
def hook(event, args):
    if event == "sqlite3.connect/handle":  # the scratch posts.sqlite is open, the dump being copied in
        os.kill(os.getpid(), signal.SIGKILL)
sys.addaudithook(hook)
from graphctx.cli import main
main(sys.argv[1:])
"""


def test_a_scratch_sqlite_left_by_kill_9_is_removed_on_the_next_start(tmp_path, capsys):
    site = write_site(tmp_path / "site")
    archive = make_7z(tmp_path / "site.7z", {f"site/{n}": site / n for n in ("Posts.xml", "PostLinks.xml")})
    config = small_config(tmp_path, archive)
    argv = ["data", str(archive), "--config", str(config), "--no-token-limit"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    killed = subprocess.run([sys.executable, "-c", KILL_AT_SQLITE, *argv], env=env, capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    datasets = tmp_path / "cache" / "datasets"
    left = list(datasets.glob(".*.tmp/scratch/posts.sqlite"))
    assert len(left) == 1

    assert main(argv) == 0
    capsys.readouterr()
    (entry,) = datasets.iterdir()  # the entry, and no temporary
    assert not entry.name.startswith(".") and (entry / "summary.json").is_file()


def test_a_live_builds_scratch_is_left_alone(tmp_path):
    from test_folder_lock import held

    scratch = tmp_path / "datasets" / ".key.abc.tmp" / "scratch"
    scratch.mkdir(parents=True)
    (scratch / "posts.sqlite").write_bytes(b"live")
    with held(scratch):
        assert remove_dead_builds(tmp_path / "datasets") == []
        assert (scratch / "posts.sqlite").read_bytes() == b"live"
    assert remove_dead_builds(tmp_path / "datasets") == [scratch.parent]
    assert not scratch.parent.exists()
