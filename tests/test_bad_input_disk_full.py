"""Bad input, round four: a full disk under the cache or the output folder is one ``error: disk full``
line, on a real small tmpfs (skipped where it cannot be mounted: it takes root), not a SQLite, pyarrow
or OSError traceback; nothing half-written is left beside what was there (issue 34)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_annotate import ANNOTATORS, DATA

from graphctx.cli import main


@contextlib.contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """``folder`` as a tmpfs of ``size`` bytes (``1m``) for the block; the test is skipped without root."""
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True)  # even when a failure left a file open


def one_line(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    assert main(argv) == 1
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()  # no traceback
    assert line.startswith("error: disk full: "), line
    return line


@pytest.mark.parametrize(
    ("size", "what"),
    [("1m", "SQLite: database or disk is full"), ("3m", "No space left on device")],  # the dump's copy; rows
)
def test_a_full_cache_while_building_the_dataset_is_one_line(tmp_path, capsys, cardano_dir, size, what):
    with tmpfs(tmp_path / "disk", size) as disk:
        line = one_line(["data", str(cardano_dir), "--no-token-limit", "--cache_dir", str(disk)], capsys)
        assert what in line
        assert list((disk / "datasets").iterdir()) == []  # no entry, no temporary


def test_a_full_output_folder_is_one_line(tmp_path, capsys):
    with tmpfs(tmp_path / "disk", "64k") as disk:
        with contextlib.suppress(OSError), open(disk / "filler", "wb") as filler:  # fill it up
            while True:
                filler.write(b"x" * 4096)
                filler.flush()
        argv = ["annotate", "export", "--predictions-dir", str(DATA / "predictions"), "--site", "cardano"]
        argv += ["--variants", "GraphGen", "--questions", "2", "--annotators", *ANNOTATORS]
        line = one_line([*argv, "--out", str(disk / "export")], capsys)
        assert "no space left on device" in line.lower()
        assert [p.name for p in disk.iterdir()] == ["filler"]
