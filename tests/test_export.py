"""graphctx export: a real evaluation run (tiny random Llama and a baseline on two cardano questions) as a
Hugging Face dataset folder that ``datasets`` loads, holding the run's predictions and scores as they are;
a second export is byte-identical; bad input is one line and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
import yaml
from evaluation_workspace import write_workspace

from graphctx.cli import main
from graphctx.evaluation.jsonl import read_records
from graphctx.evaluation.matrix.export import MARKER
from graphctx.evaluation.matrix.runner import EvaluationRun
from graphctx.pipeline.config_file import load_config

VARIANTS = ["Base-GraphContextGen", "RetrievedAnswer"]


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory, cardano_dir, tiny_bert) -> Path:
    """An evaluate.py run folder: a KG-enhanced graph variant and a dense baseline, two questions."""
    root = tmp_path_factory.mktemp("export")
    evaluation = {"variants": VARIANTS, "output_dir": str(root / "run"), "limit": 2, "bootstrap_samples": 20}
    config = write_workspace(
        root,
        cardano_dir,
        tiny_bert,
        "eval.yaml",
        evaluation,
        generation={"max_new_tokens": 3, "batch_size": 2, "max_prompt_tokens": 256},
    )
    EvaluationRun(load_config(config)).run()
    return root / "run"


def export(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["export", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_the_dataset_holds_every_prediction_and_score_of_the_run(run_folder, tmp_path, capsys):
    out = tmp_path / "dataset"
    status, printed, err = export(capsys, "--run", str(run_folder), "--to", str(out))
    assert status == 0, err
    assert printed.strip() == str(out)
    rows = datasets.load_dataset(str(out))["test"]  # the card's configs entry names the Parquet files
    predictions = {
        v: {r["id"]: r for r in read_records(run_folder / "predictions" / f"{v}.jsonl")} for v in VARIANTS
    }
    scores = {v: {r["id"]: r for r in read_records(run_folder / "scores" / f"{v}.jsonl")} for v in VARIANTS}
    ids = sorted(set(predictions[VARIANTS[0]]) | set(predictions[VARIANTS[1]]))
    assert rows["id"] == ids and len(ids) == 2 and set(rows["site"]) == {"cardano"}
    for row in rows:
        for variant in VARIANTS:
            line = predictions[variant][row["id"]]
            assert row["question"] == line["question"] and row["gold"] == line["gold"]
            assert row[f"{variant}/answer"] == line["generated"]
            for field in (
                "context",
                "prompt",
                "retrieved_ids",
                "retrieval_fallback",
                "stop",
                "prompt_tokens",
            ):
                assert row[f"{variant}/{field}"] == line[field], (variant, field)
            stored = scores[variant][row["id"]]
            assert len(stored) > 5
            for key, value in stored.items():
                if key != "id":
                    assert row[f"{variant}/score/{key}"] == value, (variant, key)
    card = (out / "README.md").read_text()
    metadata = yaml.safe_load(card.split("---\n")[1])
    assert metadata["license"] == "cc-by-sa-4.0"
    assert metadata["graphctx"]["sites"] == ["cardano"] and metadata["graphctx"]["variants"] == VARIANTS
    assert "tiny-random" in metadata["graphctx"]["stand_ins"]
    assert len(metadata["graphctx"]["exported_with_commit"]) == 40
    assert "| RetrievedAnswer |" in card  # the run's results table
    document = json.loads((out / "run.json").read_text())
    assert document["variants"]["RetrievedAnswer"]["predictions"]["settings"]["variant"]["model"] == "none"
    assert set(document["variants"]["Base-GraphContextGen"]["scores"]) >= {"rouge", "autoais"}


@pytest.mark.slow
def test_exporting_again_gives_identical_files_and_overwrite_replaces_only_an_export(
    run_folder, tmp_path, capsys
):
    first, second = tmp_path / "first", tmp_path / "second"
    assert export(capsys, "--run", str(run_folder), "--to", str(first))[0] == 0
    assert export(capsys, "--run", str(run_folder), "--to", str(second))[0] == 0
    assert files_of(first) == files_of(second) and len(files_of(first)) == 4
    before = files_of(first)
    status, _, err = export(capsys, "--run", str(run_folder), "--to", str(first))
    assert (
        status == 1
        and err.strip()
        == f"error: --to {first}: already exists; pass --overwrite to replace an earlier export"
    )
    assert export(capsys, "--run", str(run_folder), "--to", str(first), "--overwrite")[0] == 0
    assert files_of(first) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first", "second"]  # nothing staged is left
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    status, _, err = export(capsys, "--run", str(run_folder), "--to", str(mine), "--overwrite")
    assert (
        status == 1
        and err.strip()
        == f"error: --to {mine}: not a folder graphctx export made (no {MARKER}); not replaced"
    )
    assert files_of(mine) == {"notes.txt": b"keep"}


def test_a_folder_that_is_not_a_run_is_one_line_and_nothing_is_written(tmp_path, capsys):
    not_run = tmp_path / "results"
    (not_run / "predictions").mkdir(parents=True)
    (not_run / "predictions" / "GraphGen.jsonl").write_text("")  # no meta: not what evaluate.py writes
    for folder in (not_run, tmp_path / "missing"):
        status, printed, err = export(capsys, "--run", str(folder), "--to", str(tmp_path / "out"))
        assert status == 1 and printed == ""
        assert err.strip().splitlines() == [
            f"error: --run {folder}: not an evaluation run folder (no predictions/<variant>.jsonl with its "
            ".meta.json; give evaluate.py's --output-dir)"
        ]
    assert not (tmp_path / "out").exists()
    (not_run / "models" / "gpt2").mkdir(parents=True)  # evaluate.py --models writes one run per model
    status, _, err = export(capsys, "--run", str(not_run), "--to", str(tmp_path / "out"))
    assert status == 1 and err.strip().endswith("a model sweep: export each of its models/<name>/)")


@pytest.mark.parametrize(
    ("repo", "reason"),
    [
        ("no-owner", "not a Hub repository id (owner/name)"),
        ("a/b/c", "not a Hub repository id (owner/name)"),
        ("owner/../x", "not a Hub repository id (owner/name)"),
        ("owner/name", "HF_HUB_OFFLINE is set; unset it to upload"),
    ],
)
def test_push_to_hub_is_checked_before_anything_is_written(repo, reason, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = tmp_path / "run"
    run.mkdir()
    status, printed, err = export(
        capsys, "--run", str(run), "--to", str(tmp_path / "out"), "--push-to-hub", repo
    )
    assert status == 1 and printed == "" and not (tmp_path / "out").exists()
    assert err.strip().splitlines()[-1].startswith("error: --push-to-hub ") and reason in err


@pytest.mark.slow
def test_a_run_still_being_written_is_refused_in_one_line(run_folder, tmp_path, capsys):
    from test_folder_lock import held

    with held(run_folder) as process:
        status, printed, err = export(capsys, "--run", str(run_folder), "--to", str(tmp_path / "out"))
    assert status == 1 and printed == "" and not (tmp_path / "out").exists()
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: {run_folder}: an evaluate.py run (or another export) is already using")
    assert f"(pid {process.pid})" in line
    assert export(capsys, "--run", str(run_folder), "--to", str(tmp_path / "out"))[0] == 0  # once it ended
