"""Bad input, round four: ``graphctx annotate`` given an ``--out`` that is a file or lies in one, and a
Label Studio JSON_MIN export instead of its JSON export: one error line saying what it is and what to
give instead, nothing written (issue 34)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_annotate import ANNOTATORS, DATA, LABEL_STUDIO, export

from graphctx.cli import main

EXPORT = ["annotate", "export", "--predictions-dir", str(DATA / "predictions"), "--site", "cardano"]
EXPORT += ["--variants", "GraphGen", "TextGen", "--questions", "4", "--annotators", *ANNOTATORS]


def one_error(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    assert main(argv) == 1
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()  # no traceback
    assert captured.out == "" and line.startswith("error: ")
    return line


@pytest.mark.parametrize("inside", [False, True])
def test_out_that_is_a_file_or_lies_in_one_is_one_line(tmp_path, capsys, inside):
    a_file = tmp_path / "a-file"
    a_file.write_text("mine\n")
    out = a_file / "sub" if inside else a_file
    where = f"lies in {a_file}, which is" if inside else "is"
    exported = export(tmp_path / "export")
    capsys.readouterr()
    imported = ["annotate", "import", "--key", str(exported), "--ratings", *map(str, LABEL_STUDIO)]
    for argv in ([*EXPORT, "--out", str(out)], [*imported, "--out", str(out)]):
        assert one_error(argv, capsys) == f"error: --out: {out} {where} a file, not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "export"]
    assert a_file.read_text() == "mine\n"


def json_min(source: Path, target: Path) -> Path:
    """What Label Studio's JSON_MIN export of ``source``'s project holds: one flat object per task, its data
    and the chosen rating side by side, without the annotations' records."""
    tasks = json.loads(source.read_text())
    rows = []
    for number, task in enumerate(tasks, start=1):
        choices = [r["value"]["choices"][0] for a in task["annotations"] for r in a["result"]]
        rows.append({**task["data"], "id": number, "rating": choices[0], "annotator": 1, "lead_time": 3.2})
    target.write_text(json.dumps(rows))
    return target


def test_a_label_studio_json_min_export_is_named_and_the_json_export_asked_for(tmp_path, capsys):
    exported = export(tmp_path / "export")
    capsys.readouterr()
    flat = json_min(LABEL_STUDIO[0], tmp_path / "ann1-min.json")
    argv = ["annotate", "import", "--key", str(exported), "--ratings", str(flat)]
    argv += ["--out", str(tmp_path / "h")]
    assert one_error(argv, capsys) == (
        f"error: {flat}: a Label Studio JSON_MIN export (flat rows, without the annotations); export the "
        "project as JSON (not JSON_MIN) and import that file"
    )
    assert not (tmp_path / "h").exists()


@pytest.mark.parametrize("site", ["../../x", "/some/dir"])
def test_a_site_that_is_not_a_sites_name_is_one_line(tmp_path, capsys, site):
    argv = [*EXPORT, "--out", str(tmp_path / "out")]
    argv[argv.index("cardano")] = site
    assert one_error(argv, capsys).startswith(f"error: site: {site!r} is not a site's name")
    assert not (tmp_path / "out").exists()
