"""graphctx.evaluation.matrix.stale: rows and files moved aside with a reason, never deleted."""

from __future__ import annotations

import json

from graphctx.evaluation.jsonl import dump_line, read_records
from graphctx.evaluation.matrix.stale import StaleArea, move_aside


def write_rows(path, ids):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(dump_line({"id": i, "generated": f"answer {i}"}) for i in ids))


def test_rows_and_files_move_into_one_folder_per_run_with_their_reasons(tmp_path):
    predictions, scores = tmp_path / "predictions" / "V.jsonl", tmp_path / "scores" / "V" / "rouge.jsonl"
    write_rows(predictions, [1, 2, 3])
    write_rows(scores, [1, 2])
    lines: list[str] = []
    area = StaleArea(tmp_path, lines.append)
    assert area.move_rows(predictions, [2, 99], "not in the split") == 1
    assert area.move_rows(predictions, [], "nothing") == 0
    assert area.move_file(scores, "settings changed") is not None
    assert area.move_file(tmp_path / "absent.jsonl", "nothing") is None
    assert [r["id"] for r in read_records(predictions)] == [1, 3] and not scores.exists()
    folder = area.folder
    assert folder.parent == tmp_path / "stale"
    assert [r["id"] for r in read_records(folder / "predictions" / "V.jsonl")] == [2]
    assert [r["id"] for r in read_records(folder / "scores" / "V" / "rouge.jsonl")] == [1, 2]
    manifest = [json.loads(line) for line in (folder / "moved.jsonl").open()]
    assert manifest == [
        {"path": "predictions/V.jsonl", "ids": [2], "reason": "not in the split"},
        {"path": "scores/V/rouge.jsonl", "ids": None, "reason": "settings changed"},
    ]
    assert len(lines) == 2 and "not in the split" in lines[0]
    assert area.summary().startswith("moved aside 1 file(s) and 1 row(s)")


def test_a_file_moved_twice_keeps_both_copies_and_a_second_run_gets_its_own_folder(tmp_path):
    path = tmp_path / "predictions" / "V.jsonl"
    area = StaleArea(tmp_path, lambda _: None)
    write_rows(path, [1])
    area.move_file(path, "first")
    write_rows(path, [2])
    area.move_file(path, "second")
    assert sorted(p.name for p in (area.folder / "predictions").iterdir()) == ["V.2.jsonl", "V.jsonl"]
    write_rows(path, [3])
    other = move_aside(tmp_path, path, "a later run", ids=[3])
    assert other.folder != area.folder and [m.ids for m in other.moved] == [[3]]
