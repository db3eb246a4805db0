"""``graphctx annotate``: the blinded export, and the import of ratings as the annotation tools export them.

The ratings files under tests/data/annotation/ were exported by the real tools, Doccano 1.8.4 (a
text-classification project per annotator; its JSONL export zip) and Label Studio 1.23.2 (a project with the
export's labeling config; its JSON export), from the export of tests/data/annotation/predictions/ that
:func:`export` makes, rated with tests/data/annotation/ratings_plan.json;
scripts/annotation/produce_fixtures.py reproduces them.

Hand-computed figures of ratings_plan.json (questions in id order; W = win, T = tie, L = loss against gold):

- GraphGen vs gold: ann1 W T L T, ann2 T W L T, ann3 T W T W -> (2 + 2 + 3) / 12 = 7/12;
- TextGen vs gold: ann1 L T L L, ann2 L T L L, ann3 L L W L -> (0.5 + 0.5 + 1) / 12 = 2/12;
- counts of 1..5: GraphGen 0 1 4 4 3, TextGen 2 5 3 1 1, gold 0 2 3 5 2.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import krippendorff
import numpy as np
import pytest
import yaml
from tiny_config import TINY

from graphctx.cli import main
from graphctx.errors import ConfigError, DataError
from graphctx.evaluation.annotation.export import ExportSpec, make_items, read_predictions
from graphctx.evaluation.annotation.formats import GOLD, read_ratings
from graphctx.evaluation.annotation.ingest import Rating, collect_ratings, read_keys
from graphctx.evaluation.annotation.ratings import every_site, ordinal_alpha, win_outcomes

DATA = Path(__file__).parent / "data" / "annotation"
ANNOTATORS = ("ann1", "ann2", "ann3")
DOCCANO = [DATA / "doccano" / f"{a}.zip" for a in ANNOTATORS]
LABEL_STUDIO = [DATA / "label-studio" / f"{a}.json" for a in ANNOTATORS]
PLAN = json.loads((DATA / "ratings_plan.json").read_text())["ratings"]


def export(out: Path, seed: int = 0, questions: int = 4) -> Path:
    """The export the fixtures were rated from (seed 0), through the command line."""
    argv = ["annotate", "export", "--predictions-dir", str(DATA / "predictions"), "--site", "cardano"]
    argv += ["--variants", "GraphGen", "TextGen", "--questions", str(questions), "--annotators", *ANNOTATORS]
    assert main([*argv, "--seed", str(seed), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export(tmp_path_factory.mktemp("annotate") / "export")


def ratings_of(exported: Path, files: list[Path]) -> list[Rating]:
    return collect_ratings(files, read_keys([exported]))


def test_export_is_blinded_and_each_annotator_rates_the_same_items_in_their_own_order(exported: Path):
    key = json.loads((exported / "key.json").read_text())
    assert len(key["items"]) == 4 * 3  # questions × (2 variants + gold)
    questions = {entry["question_id"] for entry in key["items"].values()}
    assert len(questions) == 4 and 107 not in questions  # 107 is answered by GraphGen only
    orders = []
    for annotator in ANNOTATORS:
        doccano = [
            json.loads(line)
            for line in (exported / "doccano" / f"{annotator}.jsonl").read_text().splitlines()
        ]
        tasks = json.loads((exported / "label-studio" / f"{annotator}.json").read_text())
        assert [line["item"] for line in doccano] == [task["data"]["item"] for task in tasks]
        shown = json.dumps(doccano) + json.dumps(tasks)
        assert "GraphGen" not in shown and "TextGen" not in shown and GOLD not in shown.lower()
        orders.append([line["item"] for line in doccano])
    assert all(sorted(order) == sorted(key["items"]) for order in orders)
    assert len({tuple(order) for order in orders}) == 3
    assert '<Choice value="5"/>' in (exported / "label-studio" / "labeling_config.xml").read_text()
    assert [
        label["text"] for label in json.loads((exported / "doccano" / "labels.json").read_text())
    ] == list("12345")


def test_the_fixtures_were_rated_from_this_export(exported: Path):
    """A fresh export with the fixtures' settings is the one the tools rated (same fingerprint)."""
    fingerprint = json.loads((exported / "key.json").read_text())["fingerprint"]
    assert {r.export for path in DOCCANO + LABEL_STUDIO for r in read_ratings(path)} == {fingerprint}


def test_export_draws_only_questions_every_variant_answered(tmp_path: Path):
    answers = read_predictions(DATA / "predictions", ("GraphGen", "TextGen"))
    spec = ExportSpec("cardano", ("GraphGen", "TextGen"), 6, ANNOTATORS)
    items, _ = make_items(answers, spec)
    assert {item.question_id for item in items} == {101, 102, 103, 104, 105, 106}
    with pytest.raises(DataError, match="only 6 questions are answered by every one"):
        make_items(answers, ExportSpec("cardano", ("GraphGen", "TextGen"), 7, ANNOTATORS))


def test_export_refuses_an_existing_folder_unless_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture):
    out = export(tmp_path / "export")
    before = (out / "key.json").read_text()
    argv = ["annotate", "export", "--predictions-dir", str(DATA / "predictions"), "--site", "cardano"]
    argv += ["--variants", "GraphGen", "--questions", "2", "--annotators", "x", "--out", str(out)]
    assert main(argv) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --out {out}: already exists; choose another folder or pass --overwrite"
    ]
    assert (out / "key.json").read_text() == before
    assert main([*argv, "--overwrite"]) == 0
    assert json.loads((out / "key.json").read_text())["annotators"] == ["x"]
    # --overwrite never deletes what it did not write: a run folder, a folder with more in it, a file
    run = tmp_path / "eval-run"
    (run / "predictions").mkdir(parents=True)
    (run / "predictions" / "GraphGen.jsonl").write_text("{}\n")
    (out / "notes.txt").write_text("mine")
    (tmp_path / "file.txt").write_text("x")
    for target in (run, out, tmp_path / "file.txt"):
        capsys.readouterr()
        assert main([*argv[:-1], str(target), "--overwrite"]) == 1
        (error,) = capsys.readouterr().err.strip().splitlines()
        assert error.startswith(("error: --out ", "error: --out: ")) and str(target) in error
    assert (run / "predictions" / "GraphGen.jsonl").read_text() == "{}\n"
    assert (out / "notes.txt").read_text() == "mine" and (tmp_path / "file.txt").read_text() == "x"


def test_export_of_a_missing_variant_writes_nothing(tmp_path: Path):
    answers_dir = DATA / "predictions"
    with pytest.raises(DataError, match="no predictions of variant 'Nope'"):
        read_predictions(answers_dir, ("GraphGen", "Nope"))
    argv = [
        "annotate",
        "export",
        "--predictions-dir",
        str(answers_dir),
        "--site",
        "cardano",
        "--variants",
        "Nope",
    ]
    assert main([*argv, "--annotators", "a", "--out", str(tmp_path / "out")]) == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("files", [DOCCANO, LABEL_STUDIO, [DOCCANO[0], LABEL_STUDIO[1], DOCCANO[2]]])
def test_round_trip_figures_match_the_hand_computed_ones(exported: Path, files: list[Path], tmp_path: Path):
    argv = [
        "annotate",
        "import",
        "--key",
        str(exported),
        "--ratings",
        *map(str, files),
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    site = json.loads((tmp_path / "human_eval.json").read_text())["cardano"]
    assert site["distribution"] == {
        "GraphGen": [0, 1, 4, 4, 3],
        "TextGen": [2, 5, 3, 1, 1],
        "gold": [0, 2, 3, 5, 2],
    }
    assert site["win_rate"]["GraphGen"]["rate"] == pytest.approx(7 / 12, abs=1e-6)
    assert site["win_rate"]["TextGen"]["rate"] == pytest.approx(2 / 12, abs=1e-6)
    for win in site["win_rate"].values():
        assert 0 <= win["low"] <= win["rate"] <= win["high"] <= 1 and win["questions"] == 4
    assert (tmp_path / "figure3.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| GraphGen | 58.3% |" in (tmp_path / "human_eval.md").read_text()
    assert "cardano,win_rate,TextGen,,0.16666666666666666," in (tmp_path / "human_eval.csv").read_text()


def test_win_outcomes_per_question_and_the_alpha_of_the_plan(exported: Path):
    ratings = ratings_of(exported, DOCCANO)
    assert win_outcomes(ratings, "GraphGen") == pytest.approx([2 / 3, 5 / 6, 1 / 6, 2 / 3])
    # alpha on the annotators × items matrix of the plan, built here independently of the import
    key = json.loads((exported / "key.json").read_text())["items"]
    questions = sorted({entry["question_id"] for entry in key.values()})
    items = sorted(key)
    matrix = [
        [PLAN[a][key[i]["source"]][questions.index(key[i]["question_id"])] for i in items] for a in ANNOTATORS
    ]
    expected = krippendorff.alpha(reliability_data=np.array(matrix, float), level_of_measurement="ordinal")
    (site,) = every_site(ratings, samples=200)
    assert site.alpha == pytest.approx(expected, abs=1e-9)


def test_ordinal_alpha_of_krippendorffs_textbook_example():
    """Krippendorff (2011), "Computing Krippendorff's alpha-reliability", 4 observers × 12 units with missing
    values: ordinal alpha 0.815."""
    table = [
        "1 2 3 3 2 1 4 1 2 . . .",
        "1 2 3 3 2 2 4 1 2 5 . 3",
        ". 3 3 3 2 3 4 2 2 5 1 .",
        "1 2 3 3 2 4 4 1 2 5 1 .",
    ]
    ratings = [
        Rating("s", observer, f"u{unit:02d}", unit, GOLD, int(value))
        for observer, row in zip("ABCD", table, strict=True)
        for unit, value in enumerate(row.split(), start=1)
        if value != "."
    ]
    assert ordinal_alpha(ratings) == pytest.approx(0.815, abs=5e-4)


def doccano_lines(path: Path) -> list[dict]:
    with zipfile.ZipFile(path) as archive:
        return [json.loads(line) for line in archive.read(f"{path.stem}.jsonl").decode().splitlines()]


def write_lines(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def refused(exported: Path, files: list[Path], out: Path, capsys: pytest.CaptureFixture) -> str:
    """The one error line of an import of ``files``, which writes nothing."""
    argv = ["annotate", "import", "--key", str(exported), "--ratings", *map(str, files), "--out", str(out)]
    assert main(argv) == 1
    assert not out.exists()
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


def test_ratings_of_another_export_are_refused(exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    other = export(tmp_path / "other", seed=1)
    line = refused(other, DOCCANO, tmp_path / "out", capsys)
    assert "is from another export" in line and str(DOCCANO[0]) in line


def test_missing_items_and_annotators_are_refused(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture
):
    short = write_lines(tmp_path / "ann1.jsonl", doccano_lines(DOCCANO[0])[:-1])
    line = refused(exported, [short, *DOCCANO[1:]], tmp_path / "out", capsys)
    assert "annotator 'ann1' rated 11 of 12 items" in line
    line = refused(exported, LABEL_STUDIO[:2], tmp_path / "out", capsys)
    assert "annotator 'ann3' rated 0 of 12 items" in line


def test_a_rating_outside_the_scale_is_refused(exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    tasks = json.loads(LABEL_STUDIO[0].read_text())
    tasks[3]["annotations"][0]["result"][0]["value"]["choices"] = ["6"]
    bad = tmp_path / "ann1.json"
    bad.write_text(json.dumps(tasks))
    line = refused(exported, [bad, *LABEL_STUDIO[1:]], tmp_path / "out", capsys)
    assert line.startswith(f"error: {bad}: task 4: item ") and line.endswith("rating '6' is outside 1–5")


def test_duplicated_ratings_are_refused(exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    line = refused(exported, [*DOCCANO, DOCCANO[0]], tmp_path / "out", capsys)
    assert "annotator 'ann1' rated item" in line and "again" in line
    tasks = json.loads(LABEL_STUDIO[1].read_text())
    tasks[0]["annotations"].append(tasks[0]["annotations"][0])  # a second annotation of one task
    twice = tmp_path / "ann2.json"
    twice.write_text(json.dumps(tasks))
    line = refused(exported, [LABEL_STUDIO[0], twice, LABEL_STUDIO[2]], tmp_path / "out", capsys)
    assert line.startswith(f"error: {twice}: task 1: item ") and "is rated 2 times" in line


def test_two_keys_of_one_site_and_a_file_that_is_no_key_are_refused(exported: Path, tmp_path: Path):
    with pytest.raises(ConfigError, match="site 'cardano' is already given by"):
        read_keys([exported, export(tmp_path / "other", seed=1)])
    (tmp_path / "key.json").write_text("{}")
    with pytest.raises(DataError, match="not a key file"):
        read_keys([tmp_path / "key.json"])


def test_bad_export_settings_are_refused():
    with pytest.raises(ConfigError, match="'gold' is the gold answer"):
        ExportSpec("s", ("gold",), 1, ("a",))
    with pytest.raises(ConfigError, match="is not a file name"):
        ExportSpec("s", ("v",), 1, ("../a",))
    with pytest.raises(ConfigError, match="a name is given twice"):
        ExportSpec("s", ("v",), 1, ("a", "a"))


def test_export_finds_the_predictions_and_the_site_through_the_config(tmp_path: Path):
    """With --config: ``<trainer.default_root_dir>/eval/predictions`` (where evaluate.py writes them) and the
    site named after the config's dump folder (cardano)."""
    config = yaml.safe_load(TINY.read_text())
    config["trainer"]["default_root_dir"] = str(tmp_path / "run")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    shutil.copytree(DATA / "predictions", tmp_path / "run" / "eval" / "predictions")
    argv = ["annotate", "export", "--config", str(tmp_path / "config.yaml"), "--variants", "GraphGen"]
    assert main([*argv, "--questions", "3", "--annotators", "a", "b", "--out", str(tmp_path / "out")]) == 0
    key = json.loads((tmp_path / "out" / "key.json").read_text())
    assert key["site"] == "cardano" and len(key["items"]) == 3 * 2
