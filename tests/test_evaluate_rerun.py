"""Reruns of evaluate.py in an output folder that holds an earlier run: scores are keyed by what computed
them (a metric setting change re-scores that metric alone, never two versions in one column), and no rerun
deletes an answer (a smaller limit keeps the rows, ``--overwrite`` and foreign rows move them into
``stale/``). Real runs on the cardano dump with the tiny random Llama (answers and AutoAIS judge)."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from evaluation_workspace import write_workspace

from graphctx.evaluation.jsonl import dump_line, read_records
from graphctx.evaluation.matrix.runner import MatrixEvaluation
from graphctx.pipeline.config_file import load_config

VARIANT = "Base-TextGen"
JUDGE = "autoais[causal-lm:tiny-random]"
SHORT_JUDGE = ["--evaluation.metrics.autoais.max_input_tokens", "16"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, cardano_dir, tiny_bert) -> Path:
    """The config (one variant, two questions) and its run in ``first``; and a fresh run with a judge
    limit of 16 tokens (no input fits) in ``short``."""
    root = tmp_path_factory.mktemp("rerun")
    evaluation = {
        "variants": [VARIANT],
        "output_dir": str(root / "first"),
        "limit": 2,
        "bootstrap_samples": 20,
    }
    config = write_workspace(
        root,
        cardano_dir,
        tiny_bert,
        "eval.yaml",
        evaluation,
        generation={"max_new_tokens": 3, "batch_size": 2, "max_prompt_tokens": 256},
    )
    MatrixEvaluation(load_config(config)).evaluate()
    MatrixEvaluation(load_config(config, SHORT_JUDGE), output_dir=root / "short").evaluate()
    return root


def copy_of_first(workspace: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    shutil.copytree(workspace / "first", out)
    return out


def rerun(
    workspace: Path, out: Path, overrides=(), limit: int | None = None, overwrite: bool = False
) -> list[str]:
    """Run the config again into ``out``; its log lines."""
    lines: list[str] = []
    config = load_config(workspace / "eval.yaml", list(overrides))
    MatrixEvaluation(config, limit=limit, output_dir=out, log=lines.append).evaluate(overwrite=overwrite)
    return lines


def scores(out: Path) -> dict[int, dict]:
    return {r["id"]: r for r in read_records(out / "scores" / f"{VARIANT}.jsonl")}


def predictions(out: Path) -> list[dict]:
    return read_records(out / "predictions" / f"{VARIANT}.jsonl")


def table_answered(out: Path) -> set[str]:
    with open(out / "results.csv") as handle:
        return {row["answered"] for row in csv.DictReader(handle)}


def moved(out: Path) -> list[dict]:
    return [json.loads(line) for path in (out / "stale").glob("*/moved.jsonl") for line in path.open()]


def test_a_metric_setting_change_rescores_that_metric_and_keeps_the_rest(workspace, tmp_path):
    out = copy_of_first(workspace, tmp_path)
    before = scores(out)
    answers = (out / "predictions" / f"{VARIANT}.jsonl").read_bytes()
    assert all(row[JUDGE] is not None for row in before.values())  # the default limit judges both rows
    log = rerun(workspace, out, SHORT_JUDGE)
    after, fresh = scores(out), scores(workspace / "short")
    assert {i: (r[JUDGE], r["autoais_over_limit[causal-lm:tiny-random]"]) for i, r in after.items()} == {
        i: (r[JUDGE], r["autoais_over_limit[causal-lm:tiny-random]"]) for i, r in fresh.items()
    }
    assert all(row[JUDGE] is None for row in after.values())  # no input fits 16 tokens: none judged
    others = sorted(key for key in before[next(iter(before))] if not key.startswith("autoais"))
    assert len(others) > 5  # id, ROUGE, BERTScore, fact score, entity Jaccard
    for key in others:
        assert [r[key] for r in after.values()] == [r[key] for r in before.values()], key
    # the answers and every other metric were reused, only AutoAIS scored again
    assert (out / "predictions" / f"{VARIANT}.jsonl").read_bytes() == answers
    assert not [line for line in log if "answered" in line]
    assert [line for line in log if "scored" in line] == [f"{VARIANT}: batch 1 scored (autoais)"]
    entries = moved(out)  # the scores and their meta file, nothing else
    assert [e["path"] for e in entries] == [f"scores/{VARIANT}/autoais{s}" for s in (".jsonl", ".meta.json")]
    assert all(e["ids"] is None and "max_input_tokens" in e["reason"] for e in entries)
    stale = next((out / "stale").glob(f"*/scores/{VARIANT}/autoais.jsonl"))
    assert [r[JUDGE] for r in read_records(stale)] == [r[JUDGE] for r in before.values()]


def test_a_run_restarted_with_new_metric_settings_never_mixes_two_versions(workspace, tmp_path):
    """Stopped after one question with the old judge limit, restarted on two with the new: the first
    row's AutoAIS is judged again, as the second's is."""
    out = tmp_path / "out"
    rerun(workspace, out, limit=1)
    assert [r[JUDGE] is None for r in scores(out).values()] == [False]
    rerun(workspace, out, SHORT_JUDGE)
    assert {i: r[JUDGE] for i, r in scores(out).items()} == {
        i: r[JUDGE] for i, r in scores(workspace / "short").items()
    }


def test_a_score_shard_of_other_metric_settings_is_moved_aside_not_merged(workspace, tmp_path):
    out = copy_of_first(workspace, tmp_path)
    shards = out / "scores" / VARIANT / "shards"
    shards.mkdir()
    forged = [dict(r, **{JUDGE: 0.5}) for r in read_records(out / "scores" / VARIANT / "autoais.jsonl")]
    shard = shards / "autoais.0123456789abcdef0123.rank1.jsonl"
    shard.write_text("".join(dump_line(r) for r in forged))
    (out / "scores" / VARIANT / "autoais.jsonl").unlink()  # as if rank 1 had scored them, then died
    rerun(workspace, out)
    assert {i: r[JUDGE] for i, r in scores(out).items()} == {
        i: r[JUDGE] for i, r in scores(workspace / "first").items()
    }
    assert not shard.exists()
    assert [m["path"] for m in moved(out)] == [f"scores/{VARIANT}/shards/{shard.name}"]


def test_overwrite_moves_answers_of_other_settings_aside_never_deletes_them(workspace, tmp_path):
    out = copy_of_first(workspace, tmp_path)
    old = predictions(out)
    rerun(workspace, out, ["--generation.max_new_tokens", "2"], overwrite=True)
    assert all(r["new_tokens"] <= 2 for r in predictions(out)) and len(predictions(out)) == 2
    (folder,) = (out / "stale").iterdir()
    assert read_records(folder / "predictions" / f"{VARIANT}.jsonl") == old
    assert len(read_records(folder / "scores" / VARIANT / "rouge.jsonl")) == 2
    reasons = {m["path"]: m["reason"] for m in moved(out)}
    assert "generation.max_new_tokens" in reasons[f"predictions/{VARIANT}.jsonl"]


def test_a_smaller_limit_keeps_every_answer_and_a_foreign_row_is_moved_aside(workspace, tmp_path):
    out = copy_of_first(workspace, tmp_path)
    old = predictions(out)
    foreign = dict(old[0], id=987654321, generated="an answer to a question of another split")
    with open(out / "predictions" / f"{VARIANT}.jsonl", "a") as handle:
        handle.write(dump_line(foreign))
    rerun(workspace, out, limit=1)
    assert sorted(r["id"] for r in predictions(out)) == sorted(r["id"] for r in old)
    assert predictions(out)[1:] == [r for r in old if r["id"] != predictions(out)[0]["id"]]
    assert sorted(scores(out)) == sorted(r["id"] for r in old)
    assert table_answered(out) == {"1"}  # the table shows the requested row only
    (entry,) = moved(out)
    assert entry["path"] == f"predictions/{VARIANT}.jsonl" and entry["ids"] == [987654321]
    assert "not in split" in entry["reason"]


def test_another_variant_set_leaves_the_other_variants_files_in_place(workspace, tmp_path):
    out = copy_of_first(workspace, tmp_path)
    kept = {p: p.read_bytes() for p in out.rglob("*.json*") if VARIANT in str(p.relative_to(out))}
    lines: list[str] = []
    table = MatrixEvaluation(
        load_config(workspace / "eval.yaml"), ["ZeroShot"], output_dir=out, log=lines.append
    ).evaluate()
    assert [row.variant.name for row in table.rows] == ["ZeroShot"]
    assert {p: p.read_bytes() for p in kept} == kept and not (out / "stale").exists()


def test_the_judges_control_pairs_are_reported_and_judged_again_only_for_a_new_judge(workspace, tmp_path):
    out = copy_of_first(workspace, tmp_path)
    results = (out / "results.md").read_text()
    assert "## Judges on control pairs" in results
    judges = json.loads((out / "judges.json").read_text())
    autoais = judges["judges"]["autoais"]
    n = judges["construction"]["pairs_per_side"]
    column = "AutoAIS (whole context) [causal-lm:tiny-random]"
    assert n == 2 and autoais["column"] == column  # both rows' gold answers
    assert autoais["n_supported"] == autoais["n_unsupported"] == n
    row = next(line for line in results.splitlines() if line.startswith(f"| {column} |"))
    assert f"| {n} + ({n} + " in row and row.endswith(f"| {autoais['verdict']} |")
    assert set(autoais["kinds"]) == {"other_question", "neighbour", "swapped_fact"}
    assert not [line for line in rerun(workspace, out) if "control pairs" in line]  # cached
    log = rerun(workspace, out, ["--evaluation.metrics.autoais.mode", "sentence"])
    assert [line for line in log if "control pairs" in line] == [f"autoais: judged {n} control pairs a side"]
