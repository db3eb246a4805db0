"""``graphctx annotate --task ais``: human AIS of attributed answers (Attributed QA), exported and read back.

tests/data/annotation/ais/predictions/ holds prediction lines with their ``attributions`` (the contract of
the attribution stage: rtr, posthoc, and autoais_rerank with ``judge_in_system``). The judgments under
tests/data/annotation/ais/ were exported by the real tools, Doccano 1.8.4 and Label Studio 1.23.2, from the
export :func:`export` makes (4 questions: 101, 102, 104, 106), judged as ais/judgments_plan.json says;
``scripts/annotation/produce_fixtures.py --task ais`` reproduces them.

Hand-computed figures (per system, questions in id order; AIS of an item: the majority of its 3 annotators):

- AutoAIS (P ≥ 0.5): GraphGen/rtr 0.9 0.8 0.3 0.4 -> 1 1 0 0 = 0.5; GraphGen/posthoc 0.95 0.6 0.1 0.3 -> 0.5;
  TextGen/rtr and TextGen/posthoc all below 0.5 -> 0; the autoais_rerank rows: judge in system, none;
- AIS: GraphGen/rtr 1 1 1 0 = 0.75; GraphGen/posthoc 1 0 0 0 = 0.25; TextGen/rtr 0 0 1 0 = 0.25;
  TextGen/posthoc 0; GraphGen/autoais_rerank 1 1 1 1 = 1; TextGen/autoais_rerank 0 1 0 0 = 0.25;
- system-level r over the 4 judge-free systems, (AutoAIS, AIS) = (.5, .75) (.5, .25) (0, .25) (0, 0):
  deviations dx = ±.25, dy = .4375 -.0625 -.0625 -.3125 -> r = .1875 / sqrt(.25 × .296875);
- per instance over their 16 items: both 1: 3, AutoAIS only: 1, AIS only: 2, both 0: 10 ->
  r (phi) = (3·10 - 1·2) / sqrt(4 · 12 · 5 · 11) = 28 / sqrt(2640);
- unclear answers: 4 of 72 judgments -> interpretable 68/72.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import krippendorff
import numpy as np
import pytest

from graphctx.cli import main
from graphctx.errors import ConfigError, DataError
from graphctx.evaluation.annotation.ais_form import (
    ATTRIBUTABLE,
    UNCLEAR,
    UNDERSTOOD,
    Judgment,
    judgment,
)
from graphctx.evaluation.annotation.ais_ratings import majority, pearson
from graphctx.evaluation.annotation.attributions import read_attributions
from graphctx.evaluation.annotation.formats import read_ratings
from graphctx.evaluation.annotation.ingest import read_keys

DATA = Path(__file__).parent / "data" / "annotation"
AIS_DATA = DATA / "ais"
ANNOTATORS = ("ann1", "ann2", "ann3")
DOCCANO = [AIS_DATA / "doccano" / f"{a}.zip" for a in ANNOTATORS]
LABEL_STUDIO = [AIS_DATA / "label-studio" / f"{a}.json" for a in ANNOTATORS]
PLAN = json.loads((AIS_DATA / "judgments_plan.json").read_text())["judgments"]


def export(out: Path, predictions: Path = AIS_DATA / "predictions", task: str = "ais") -> list[str]:
    """The export the fixtures were judged from, through the command line (its argv)."""
    argv = ["annotate", "export", "--task", task, "--predictions-dir", str(predictions), "--site", "cardano"]
    return [*argv, "--variants", "GraphGen", "TextGen", "--questions", "4", "--annotators", *ANNOTATORS]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ais") / "export"
    assert main([*export(out), "--seed", "0", "--out", str(out)]) == 0
    return out


def test_export_shows_each_answer_with_each_attribution_blinded(exported: Path):
    key = json.loads((exported / "key.json").read_text())
    assert key["task"] == "ais" and len(key["items"]) == 4 * 2 * 3  # questions × variants × architectures
    assert {e["question_id"] for e in key["items"].values()} == {101, 102, 104, 106}
    assert all(e["source"] != "gold" for e in key["items"].values())
    for annotator in ANNOTATORS:
        lines = [
            json.loads(line)
            for line in (exported / "doccano" / f"{annotator}.jsonl").read_text().splitlines()
        ]
        tasks = json.loads((exported / "label-studio" / f"{annotator}.json").read_text())
        shown = json.dumps(lines) + json.dumps(tasks)
        for hidden in ("GraphGen", "TextGen", "rtr", "posthoc", "autoais_rerank", "judge", "probability"):
            assert hidden not in shown
        for task in tasks:
            entry = key["items"][task["data"]["item"]]["attribution"]
            assert (task["data"]["passage"], task["data"]["link"]) == (entry["text"], entry["link"])
        assert all("https://cardano.stackexchange.com/q/" in line["text"] for line in lines)
    config = (exported / "label-studio" / "labeling_config.xml").read_text()
    assert config.index(f'<Choice value="{UNDERSTOOD}"/>') < config.index(f'<Choice value="{ATTRIBUTABLE}"/>')
    assert 'visibleWhen="choice-selected" whenTagName="interpretable"' in config
    labels = json.loads((exported / "doccano" / "labels.json").read_text())
    assert [label["text"] for label in labels] == [UNCLEAR, ATTRIBUTABLE, "No, not fully attributable."]


def test_the_fixtures_were_judged_from_this_export(exported: Path):
    fingerprint = json.loads((exported / "key.json").read_text())["fingerprint"]
    assert {r.export for path in DOCCANO + LABEL_STUDIO for r in read_ratings(path)} == {fingerprint}


@pytest.mark.parametrize("files", [DOCCANO, LABEL_STUDIO, [LABEL_STUDIO[0], DOCCANO[1], LABEL_STUDIO[2]]])
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
    assert main([*argv, "--bootstrap-samples", "200"]) == 0
    site = json.loads((tmp_path / "human_ais.json").read_text())["cardano"]
    systems = {(s["variant"], s["architecture"]): s for s in site["systems"]}
    expected = {
        ("GraphGen", "rtr"): (0.75, 0.5),
        ("GraphGen", "posthoc"): (0.25, 0.5),
        ("TextGen", "rtr"): (0.25, 0.0),
        ("TextGen", "posthoc"): (0.0, 0.0),
        ("GraphGen", "autoais_rerank"): (1.0, None),
        ("TextGen", "autoais_rerank"): (0.25, None),
    }
    assert {name: (s["ais"], s["autoais"]) for name, s in systems.items()} == expected
    assert all(s["judge_in_system"] == (name[1] == "autoais_rerank") for name, s in systems.items())
    assert all(s["low"] <= s["ais"] <= s["high"] and s["items"] == 4 for s in systems.values())
    assert site["pearson_system_level"] == {
        "r": pytest.approx(0.1875 / math.sqrt(0.25 * 0.296875)),
        "systems": 4,
    }
    assert site["pearson_instance_level"] == {"r": pytest.approx(28 / math.sqrt(2640)), "items": 16}
    assert site["interpretable"] == pytest.approx(68 / 72, abs=1e-6)
    # nominal alpha on the annotators × items matrix of the plan, built here independently of the import
    key = json.loads((exported / "key.json").read_text())["items"]
    questions = sorted({e["question_id"] for e in key.values()})
    matrix = [
        [
            PLAN[a][f"{e['source']}/{e['attribution']['architecture']}"][questions.index(e["question_id"])]
            == "y"
            for e in (key[i] for i in sorted(key))
        ]
        for a in ANNOTATORS
    ]
    alpha = krippendorff.alpha(reliability_data=np.array(matrix, float), level_of_measurement="nominal")
    assert site["krippendorff_alpha_nominal"] == pytest.approx(alpha, abs=1e-6)
    markdown = (tmp_path / "human_ais.md").read_text()
    assert "| GraphGen | autoais_rerank | 100.0% | [100.0%, 100.0%] | judge in system | 4 |" in markdown
    assert "left out of both correlations" in markdown
    assert (tmp_path / "autoais_vs_ais.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "cardano,pearson_instance_level,,," in (tmp_path / "human_ais.csv").read_text()


def one_error_line(argv: list[str], out: Path, capsys: pytest.CaptureFixture) -> str:
    capsys.readouterr()
    assert main([*argv, "--out", str(out)]) == 1
    assert not out.exists()
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


def test_an_ais_export_of_predictions_without_attributions_is_refused(tmp_path: Path, capsys):
    line = one_error_line(export(tmp_path, predictions=DATA / "predictions"), tmp_path / "out", capsys)
    assert line.startswith(f"error: {DATA / 'predictions' / 'GraphGen.jsonl'}: line 1: no 'attributions'")


def test_judgments_that_are_not_one_ais_judgment_are_refused(exported: Path, tmp_path: Path, capsys):
    tasks = json.loads(LABEL_STUDIO[0].read_text())
    result = tasks[0]["annotations"][0]["result"]
    tasks[0]["annotations"][0]["result"] = [r for r in result if r["from_name"] == "interpretable"]
    tasks[0]["annotations"][0]["result"][0]["value"]["choices"] = [UNDERSTOOD]
    first_only = tmp_path / "ann1.json"
    first_only.write_text(json.dumps(tasks))
    argv = [
        "annotate",
        "import",
        "--key",
        str(exported),
        "--ratings",
        str(first_only),
        *map(str, LABEL_STUDIO[1:]),
    ]
    line = one_error_line(argv, tmp_path / "out", capsys)
    assert (
        line.startswith(f"error: {first_only}: task 1: item ") and "answers the first question only" in line
    )
    tasks = json.loads(LABEL_STUDIO[1].read_text())
    tasks[2]["annotations"].append(tasks[2]["annotations"][0])  # judged twice
    twice = tmp_path / "ann2.json"
    twice.write_text(json.dumps(tasks))
    argv = ["annotate", "import", "--key", str(exported), "--ratings", str(LABEL_STUDIO[0]), str(twice)]
    line = one_error_line([*argv, str(LABEL_STUDIO[2])], tmp_path / "out", capsys)
    assert line.startswith(f"error: {twice}: task 3: item ") and "is not one AIS judgment" in line


def test_keys_of_two_tasks_are_not_imported_together(exported: Path, tmp_path: Path):
    helpfulness = tmp_path / "helpfulness"
    argv = export(helpfulness, predictions=DATA / "predictions", task="helpfulness")
    assert main([*argv, "--out", str(helpfulness)]) == 0
    other_site = json.loads((exported / "key.json").read_text())
    other_site["site"] = "unix"
    (tmp_path / "key.json").write_text(json.dumps(other_site))
    with pytest.raises(
        ConfigError, match=r"its task is 'helpfulness', that of .* 'ais'; import one task at a time"
    ):
        read_keys([tmp_path / "key.json", helpfulness])


def test_judgments_majorities_and_correlations():
    assert judgment([]) is None
    assert judgment([UNCLEAR]) == Judgment(False, False) and judgment([UNCLEAR]).ais == 0
    assert judgment([ATTRIBUTABLE, UNDERSTOOD]) == judgment([ATTRIBUTABLE]) == Judgment(True, True)
    with pytest.raises(ValueError, match="is not one AIS judgment"):
        judgment([UNCLEAR, ATTRIBUTABLE])
    assert [majority(v) for v in ([1, 1, 0], [1, 0], [0, 0, 1], [1])] == [1.0, 0.5, 0.0, 1.0]
    assert math.isnan(pearson([1, 1, 1], [0, 1, 0]).r) and math.isnan(pearson([0, 1], [0, 1]).r)
    assert pearson([0, 1, 2], [0, 2, 4]).r == pytest.approx(1.0)


def entry(**changes) -> dict:
    base = {"architecture": "rtr", "passage": "post:1", "link": None, "text": "t", "probability": 0.5}
    return {**base, "judge_in_system": False, **changes}


def test_the_attribution_reader_keeps_to_the_contract():
    (found,) = read_attributions({"attributions": [entry()]}, "p.jsonl: line 1")
    assert found.autoais == 1.0  # P(entail) ≥ 0.5
    (found,) = read_attributions({"attributions": [entry(probability=0.4999)]}, "w")
    assert found.autoais == 0.0
    (found,) = read_attributions({"attributions": [entry(probability=0.9, judge_in_system=True)]}, "w")
    assert found.autoais is None
    (found,) = read_attributions({"attributions": [entry(probability=float("nan"))]}, "w")
    assert found.probability is None and found.autoais is None
    for row, message in (
        ({}, "w: no 'attributions'"),
        ({"attributions": []}, "not a non-empty list"),
        ({"attributions": [entry(judge_in_system="yes")]}, r"attributions\[0\]: 'judge_in_system' is 'yes'"),
        ({"attributions": [entry(probability=1.5)]}, "not in \\[0, 1\\]"),
        ({"attributions": [entry(), entry()]}, "architecture 'rtr' attributes the answer twice"),
    ):
        with pytest.raises(DataError, match=message):
            read_attributions(row, "w")
