"""Cache entries: removal is atomic (rename, then delete) and a read marks the entry recently used."""

from __future__ import annotations

import os
from pathlib import Path

from graphctx.cache import read_entry, remove_entry


def test_remove_entry_leaves_nothing_and_reports_absent(tmp_path: Path) -> None:
    entry = tmp_path / "retrieval-index" / "abc"
    (entry / "sub").mkdir(parents=True)
    (entry / "sub" / "x.bin").write_bytes(b"1" * 100)
    assert remove_entry(entry) is True
    assert list((tmp_path / "retrieval-index").iterdir()) == []
    assert remove_entry(entry) is False
    single = tmp_path / "one.json"
    single.write_text("{}")
    assert remove_entry(single) is True and not single.exists()


def test_read_entry_touches_mtime(tmp_path: Path) -> None:
    entry = tmp_path / "e.json"
    entry.write_text("7")
    os.utime(entry, (1_000_000, 1_000_000))
    assert read_entry(entry, lambda p: int(p.read_text())) == 7
    assert entry.stat().st_mtime > 1_000_000
