"""Integrity of the built dataset on the real cardano dump: independent of row order, and a damaged cache
entry is reported, moved aside and rebuilt."""

from __future__ import annotations

import random
from pathlib import Path

from graphctx.data import DatasetSettings, FilterSettings, load_qa_dataset


def _settings(source: Path) -> DatasetSettings:
    return DatasetSettings(source=str(source), workers=1, filters=FilterSettings(max_tokens=None))


def test_row_order_of_the_dump_does_not_change_the_dataset(cardano_dir, cardano_rows, tmp_path):
    """The real Posts.xml with its rows shuffled (answers before their questions) gives the same rows."""
    lines = (cardano_dir / "Posts.xml").read_text(encoding="utf-8-sig").splitlines(keepends=True)
    rows = [line for line in lines if line.lstrip().startswith("<row ")]
    head, tail = lines[: lines.index(rows[0])], lines[lines.index(rows[-1]) + 1 :]
    random.Random(0).shuffle(rows)
    ids = [int(line.split('Id="')[1].split('"')[0]) for line in rows]
    assert ids != sorted(ids)
    dump = tmp_path / "cardano"  # the site name comes from the folder name
    dump.mkdir()
    (dump / "Posts.xml").write_text("".join(head + rows + tail), encoding="utf-8")
    (dump / "PostLinks.xml").write_bytes((cardano_dir / "PostLinks.xml").read_bytes())
    shuffled = load_qa_dataset(_settings(dump), tmp_path / "cache")
    got = sorted((row for split in shuffled.values() for row in split), key=lambda row: row["id"])
    expected = sorted(cardano_rows, key=lambda row: row["id"])
    assert len(got) == len(expected) > 300
    assert got == expected


def test_damaged_cache_entry_is_reported_moved_aside_and_rebuilt(cardano_dir, tmp_path, capsys):
    """A split file cut short, or one byte changed inside an answer, is never read: the entry is named on
    stderr, moved aside, and rebuilt equal to the first build."""
    cache = tmp_path / "cache"
    first = load_qa_dataset(_settings(cardano_dir), cache)
    [entry] = (cache / "datasets").iterdir()
    expected = {name: split.to_list() for name, split in first.items()}
    train, test = entry / "train.arrow", entry / "test.arrow"
    damage = {
        train: train.read_bytes()[: train.stat().st_size // 2],
        test: test.read_bytes().replace(b"cardano-cli", b"cardano-cLi", 1),
    }
    for path, damaged in damage.items():
        assert damaged != path.read_bytes()
        path.write_bytes(damaged)
        rebuilt = load_qa_dataset(_settings(cardano_dir), cache)
        assert f"cache entry {entry} cannot be read ({path.name}: " in capsys.readouterr().err
        assert {name: split.to_list() for name, split in rebuilt.items()} == expected
        assert path.read_bytes() != damaged
    assert len([p for p in (cache / "datasets").iterdir() if ".broken-" in p.name]) == 2
