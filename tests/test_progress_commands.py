"""The progress lines of each long stage of evaluate.py, ``graphctx genqa`` and ``graphctx reproduce``, run
for real with stderr not a terminal: ``progress: <stage>: done/total unit (share), elapsed, left``.

The evaluate.py and genqa runs set the plain lines' interval (``graphctx.progress.EVERY_S``) to 0, so that
every step's line is written in a run of seconds, not only the first and the last; reproduce writes a line
at each stage's start and end whatever the interval."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest
from evaluation_workspace import write_workspace
from reproduce_workspace import LocalRun, reproduce
from test_baselines_genqa import tiny_bart

import graphctx.progress

LINE = re.compile(
    r"progress: (?P<what>[^:]+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>\w+)(?: \(\d+%\))?, "
    r"elapsed (?P<elapsed>\d+:\d\d:\d\d), left (?P<left>\?|~\d+:\d\d:\d\d|0:00:00)(?:, (?P<note>.*))?"
)


@dataclass(frozen=True)
class Line:
    done: int
    total: int
    unit: str
    left: str
    note: str


def progress_lines(stderr: str) -> dict[str, list[Line]]:
    """Each stage's progress lines, in order; every ``progress:`` line must parse."""
    stages: dict[str, list[Line]] = {}
    for text in stderr.splitlines():
        if not text.startswith("progress: "):
            continue
        match = LINE.fullmatch(text)
        assert match, text
        line = Line(
            int(match["done"]), int(match["total"]), match["unit"], match["left"], match["note"] or ""
        )
        stages.setdefault(match["what"], []).append(line)
    return stages


def check_stage(lines: list[Line], total: int, unit: str) -> None:
    """A stage's lines: 0 done (time left unknown), counts that grow to ``total`` with a time left
    estimated in between, ``total`` done at the end (nothing left)."""
    assert lines[0].done == 0 and lines[0].left == "?", lines
    assert [line.done for line in lines] == sorted(line.done for line in lines), lines
    assert all(line.total == total and line.unit == unit for line in lines), lines
    assert lines[-1].done == total and lines[-1].left == "0:00:00", lines
    between = [line for line in lines if 0 < line.done < total]
    assert all(line.left.startswith("~") for line in between), lines


@pytest.fixture
def every_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graphctx.progress, "EVERY_S", 0.0)


def test_evaluate_py_shows_each_long_stage(tmp_path, cardano_dir, tiny_bert, every_line, capsys) -> None:
    import evaluate

    generation = {"max_new_tokens": 4, "batch_size": 2, "max_prompt_tokens": 320}
    config = write_workspace(
        tmp_path, cardano_dir, tiny_bert, "tiny.yaml", {"limit": 4}, generation=generation
    )
    variants = ["ZeroShot", "GraphContextGen", "RetrievedAnswer-Graph"]
    argv = [
        "--config",
        str(config),
        "--variants",
        *variants,
        "--evaluation.output_dir",
        str(tmp_path / "out"),
    ]
    assert evaluate.main(argv) == 0
    stages = progress_lines(capsys.readouterr().err)

    # contexts: the graph index, the knowledge stage, graph retrieval, KG contexts, each variant's prompts
    contexts = stages.pop("contexts")
    check_stage(contexts, 8, "steps")
    assert [line.note for line in contexts[1:]] == [
        "pool index (graph) ready",
        "knowledge stage loaded",
        "4 queries retrieved (graph)",
        "4 contexts enhanced with KG facts (graph)",
        "4 contexts fitted to the budget (graph)",  # the baseline's: pairs without KG facts
        "4 prompts fitted (ZeroShot)",
        "4 prompts fitted (GraphContextGen)",
        "4 prompts fitted (RetrievedAnswer-Graph)",
    ]
    for stage in ("no LLM", "base model", "adapter model"):  # a line per batch of 2
        answers = stages.pop(f"answers ({stage})")
        check_stage(answers, 4, "rows")
        assert [line.done for line in answers] == [0, 2, 4]
    judged = stages.pop("judge controls (autoais)")  # the tiny judge: the supported pairs, then each kind
    check_stage(judged, judged[0].total, "pairs")
    assert judged[1].note == "supported pairs judged" and len(judged) >= 3
    for metric in ("rouge", "bertscore", "fact_score", "entity_jaccard", "autoais"):
        scores = stages.pop(f"scores ({metric})")
        check_stage(scores, 12, "rows")
        assert [line.done for line in scores] == list(range(0, 13, 2))  # a line per batch
    assert not stages  # no other stage


def test_graphctx_genqa_shows_its_inputs_and_training_steps(
    tmp_path, cardano_dir, tiny_bert, every_line, capsys
) -> None:
    from graphctx.cli import main

    evaluation = {"genqa_model": str(tmp_path / "genqa")}
    config = write_workspace(tmp_path, cardano_dir, tiny_bert, "tiny.yaml", evaluation)
    base = tiny_bart(tmp_path / "bart")
    argv = ["genqa", "--config", str(config), "--base", str(base), "--max-steps", "3", "--limit", "6"]
    assert main([*argv, "--batch-size", "2"]) == 0
    stages = progress_lines(capsys.readouterr().err)
    inputs = stages.pop("genqa inputs")
    check_stage(inputs, 3, "steps")
    assert [line.note for line in inputs[1:]] == [
        "pool index ready",
        "6 questions retrieved",
        "6 examples encoded",
    ]
    training = stages.pop("genqa training")
    check_stage(training, 3, "steps")
    assert [line.done for line in training] == [0, 1, 2, 3]
    assert all(re.fullmatch(r"epoch 0, train_loss \d+\.\d{4}", line.note) for line in training[1:])
    assert not stages


def test_graphctx_reproduce_shows_each_stage_and_the_time_left_it_recorded(local_run: LocalRun) -> None:
    # the first run: six stages, none timed before, so the time left is the rate of the stages so far
    names = ["cardano/data", "cardano/index", "cardano/train", "cardano/evaluate", "cardano/human", "tables"]
    lines = progress_lines(local_run.stderr).pop("reproduce")
    check_stage(lines, 6, "stages")
    running = [line for line in lines if line.note.startswith("running ")]
    assert [line.note for line in running] == [
        f"running {name} (stage {number} of 6)" for number, name in enumerate(names, start=1)
    ]
    assert running[0].left == "?" and all(line.left.startswith("~") for line in running[1:])

    # the tables stage again (its output gone): its time left is the seconds its record kept
    config, state = local_run.config, local_run.state
    seconds = json.loads((state / "records" / "tables.json").read_text())["seconds"]
    (state / "beside_the_paper.md").unlink()
    again = reproduce("--config", str(config), "--state", str(state), "--stages", "tables")
    assert again.returncode == 0, again.stderr[-3000:]
    tables = (state / "beside_the_paper.md").read_text().replace(str(config.parent), "ROOT")
    assert tables == local_run.outputs["state/beside_the_paper.md"]
    (first, running, last) = progress_lines(again.stderr).pop("reproduce")
    expected = "~" + graphctx.progress.clock_text(seconds)
    assert (first.done, first.total, first.left) == (0, 1, expected)
    assert (running.note, running.left) == ("running tables (stage 1 of 1)", expected)
    assert (last.done, last.left, last.note) == (1, "0:00:00", "tables done")
