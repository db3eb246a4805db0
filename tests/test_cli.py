"""Every entry point: graphctx's own errors are one ``error:`` line and exit status 1 (``--debug`` or
GRAPHCTX_DEBUG=1 add the traceback); ``--json`` is one JSON document on stdout; commands import only what
they use."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_config import recent_pool_config

import evaluate
import train
from graphctx.cli import COMMANDS, build_parser
from graphctx.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "tiny.yaml"
QUESTION = ["--question", "How do I restart the node?"]


def bad_invocations(missing: Path) -> dict[str, tuple]:
    """Per entry point, a main function and arguments that name a file that does not exist."""
    config = ["--config", str(missing)]
    return {
        "data": (cli_main, ["data", str(missing)]),
        "index": (cli_main, ["index", *config]),
        "retrieve": (cli_main, ["retrieve", *config, *QUESTION]),
        "retrieval-eval": (cli_main, ["retrieval-eval", *config]),
        "enhance": (cli_main, ["enhance", *config, *QUESTION]),
        "answer": (cli_main, ["answer", *config, *QUESTION]),
        "plan": (cli_main, ["plan", *config]),
        "genqa": (cli_main, ["genqa", *config]),
        "annotate": (cli_main, ["annotate", "import", "--key", str(missing), "--ratings", "r", "--out", "o"]),
        "export": (cli_main, ["export", "--run", str(missing), "--to", str(missing.parent / "dataset")]),
        "reproduce": (cli_main, ["reproduce", *config, "--state", str(missing.parent / "state")]),
        "serve": (cli_main, ["serve", *config, "--port", "0"]),
        "cache": (cli_main, ["cache", *config]),
        "train.py": (train.main, config),
        "evaluate.py": (evaluate.main, config),
    }


def test_every_subcommand_is_covered():
    assert set(COMMANDS) <= set(bad_invocations(Path("x")))


@pytest.mark.parametrize("entry", list(bad_invocations(Path("x"))))
def test_an_expected_error_is_one_line_and_status_1(entry, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GRAPHCTX_DEBUG", raising=False)
    missing = tmp_path / "missing.yaml"
    main, argv = bad_invocations(missing)[entry]
    assert main(argv) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(missing) in lines[0], captured.err
    assert captured.out == ""


@pytest.mark.parametrize("entry", list(bad_invocations(Path("x"))))
def test_debug_shows_the_traceback(entry, tmp_path, capsys, monkeypatch):
    main, argv = bad_invocations(tmp_path / "missing.yaml")[entry]
    flagged = ["--debug", *argv] if main is cli_main else [*argv, "--debug"]
    monkeypatch.delenv("GRAPHCTX_DEBUG", raising=False)
    assert main(flagged) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.strip().splitlines()[-1].startswith("error: ")
    monkeypatch.setenv("GRAPHCTX_DEBUG", "1")
    assert main(argv) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def run_python(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``python ARGS`` in a fresh interpreter from the repository root (``env`` added to the environment)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_json_is_the_only_thing_on_stdout_with_wandb_offline():
    """transformers prints ``[INFO] Running in WANDB offline mode`` to stdout when its W&B integration is
    imported with WANDB_MODE=offline; imported while a command runs, the line must reach stderr, not the
    JSON. No graphctx command imports it today, so the probe imports it inside ``plan``'s execute."""
    probe = (
        "import sys, graphctx.commands.plan as plan; from graphctx.cli import main; execute = plan.execute\n"
        "def noisy_execute(args, out):\n"
        "    import transformers.integrations.integration_utils\n"
        "    return execute(args, out)\n"
        f"plan.execute = noisy_execute; sys.exit(main(['plan', '--config', {str(TINY)!r}, '--json']))"
    )
    done = run_python("-c", probe, env={"WANDB_MODE": "offline"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["config"] == str(TINY)
    assert "Running in WANDB offline mode" in done.stderr


TRAINING_ONLY = ("bitsandbytes", "peft", "sentence_transformers")


def statuses_and_imports(*argvs: list[str], watched: tuple[str, ...] = TRAINING_ONLY) -> str:
    """Runs each ``graphctx`` argv in one fresh interpreter; the last stderr line: the exit statuses and
    which of the ``watched`` modules got imported."""
    probe = (
        "import sys; from graphctx.cli import main; "
        f"statuses = [main(argv) for argv in {argvs!r}]; "
        f"print(statuses, sorted(m for m in {watched!r} if m in sys.modules), file=sys.stderr)"
    )
    done = run_python("-c", probe)
    return done.stderr.strip().splitlines()[-1]


def test_data_imports_neither_peft_nor_bitsandbytes(tmp_path, smollm2_folder):
    site = tmp_path / "site"
    site.mkdir()
    (site / "Posts.xml").write_text('<?xml version="1.0" encoding="utf-8"?>\n<posts>\n</posts>\n')
    # no question at all: split 'train' is empty (status 1), after the tokenizer and the dataset were read
    # (SmolLM2's tokenizer from its converted folder: converting it again in the fresh cache takes ~25 s)
    argv = [
        "data",
        str(site),
        "--cache_dir",
        str(tmp_path / "cache"),
        "--model.spec.source",
        str(smollm2_folder),
    ]
    assert statuses_and_imports(argv) == "[1] []"


@pytest.mark.slow
def test_index_and_retrieve_import_no_training_library(tmp_path, smollm2_folder):
    """The sentence encoder runs on transformers alone: sentence-transformers' package imports its
    trainers, and through them peft and bitsandbytes."""
    config = recent_pool_config(tmp_path, smollm2_folder)
    common = ["--config", str(config), "--cache_dir", str(tmp_path / "cache")]
    index, retrieve = ["index", *common], ["retrieve", *common, *QUESTION]
    assert statuses_and_imports(index, retrieve) == "[0, 0] []"


def test_plan_imports_no_training_library():
    """``graphctx plan`` describes a config without loading a model: no peft, bitsandbytes or
    sentence-transformers (nor spaCy, which only the scorer and the extractors need)."""
    plan = ["plan", "--config", str(TINY), "--json"]
    assert statuses_and_imports(plan, watched=(*TRAINING_ONLY, "spacy")) == "[0] []"


def test_help_imports_no_heavy_library():
    probe = (
        "import sys; from graphctx.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'transformers', 'lightning', 'datasets') if m in sys.modules))"
    )
    done = run_python("-c", probe)
    assert done.stdout.strip() == "[]", done.stderr[-2000:]


def test_data_help_documents_its_settings_without_heavy_imports():
    """``graphctx data --help`` lists the ``data.dataset`` settings it reads, documented, and stays quick:
    no torch, transformers, lightning or datasets (the full config's help imports them all)."""
    probe = (
        "import contextlib, io, sys; from graphctx.cli import main; out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit): main(['data', '--help'])\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'lightning', 'datasets') if m in sys.modules)\n"
        "print(heavy, ' '.join(out.getvalue().split()))"
    )
    done = run_python("-c", probe)
    assert done.stdout.startswith("[] "), done.stdout[:200] + done.stderr[-2000:]
    assert "--data.dataset.source SOURCE A Stack Exchange site folder" in done.stdout
    assert "--data.dataset.split.train_fraction TRAIN_FRACTION" in done.stdout


def test_help_gives_each_subcommand_a_whole_sentence():
    """`graphctx --help` lists each subcommand with its docstring's first sentence, never cut mid-way (the
    first line of a wrapped docstring used to stop at "…; say")."""
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for choice in subparsers._choices_actions:
        module = importlib.import_module(f"graphctx.commands.{choice.dest.replace('-', '_')}")
        assert choice.help.endswith("."), (choice.dest, choice.help)
        assert " ".join(module.__doc__.split()).startswith(choice.help), choice.dest


# ---- one way in: every entry point parses the config alike ---------------------------------------------
OVERRIDE = ["--retrieval.top_k", "3"]  # tiny.yaml: 2
HELP_INVOCATIONS: dict[str, tuple] = {
    **{name: (cli_main, [name]) for name in COMMANDS if name != "annotate"},
    "annotate export": (cli_main, ["annotate", "export"]),
    "annotate import": (cli_main, ["annotate", "import"]),
    "train.py": (train.main, []),
    "evaluate.py": (evaluate.main, []),
}
NO_CONFIG = {"export", "annotate import", "reproduce", "cache"}
"""Commands that take no ``--section.key`` settings (reproduce: its site configs are read by its stages;
cache: each --config as the stages read it)."""


def test_every_graphctx_subcommand_is_walked():
    assert {name.split()[0] for name in HELP_INVOCATIONS} >= set(COMMANDS)


@pytest.mark.parametrize("command", list(HELP_INVOCATIONS))
def test_every_command_documents_the_settings_it_takes_or_says_it_takes_none(command, capsys):
    main, argv = HELP_INVOCATIONS[command]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    if command in NO_CONFIG:
        assert "--retrieval.top_k" not in text and "no --section.key settings" in text, text[-400:]
    else:
        assert "--config CONFIG" in text and "--retrieval.top_k TOP_K" in text, text[:400]
        assert "--retrieval.top_k TOP_K Past questions returned per query" in text  # its docstring


class Built(Exception):
    """Raised by the probe as soon as a command has built its run config."""


def override_invocations(tmp_path: Path) -> dict[str, tuple]:
    """Per command that reads a config: its main and arguments with one ``--section.key`` override."""
    config = ["--config", str(TINY), *OVERRIDE]
    out = ["--out", str(tmp_path / "export")]
    return {
        "data": (cli_main, ["data", str(tmp_path), *config]),
        "index": (cli_main, ["index", *config]),
        "retrieve": (cli_main, ["retrieve", *config, *QUESTION]),
        "retrieval-eval": (cli_main, ["retrieval-eval", *config]),
        "enhance": (cli_main, ["enhance", *config, *QUESTION]),
        "answer": (cli_main, ["answer", *config, *QUESTION]),
        "plan": (cli_main, ["plan", *config]),
        "genqa": (cli_main, ["genqa", *config]),
        "annotate export": (
            cli_main,
            ["annotate", "export", *config, "--variants", "a", "--annotators", "x", *out],
        ),
        "serve": (cli_main, ["serve", *config, "--port", "0"]),
        "train.py": (train.main, config),
        "evaluate.py": (evaluate.main, config),
    }


def test_every_command_that_reads_a_config_is_tried():
    commands = set(override_invocations(Path("x")))
    assert commands | NO_CONFIG == set(HELP_INVOCATIONS)


@pytest.mark.parametrize("command", list(override_invocations(Path("x"))))
def test_every_command_takes_a_section_key_override(command, tmp_path, monkeypatch):
    """The override reaches the run config the command builds (stopped right there)."""
    from graphctx.pipeline.run_config import RunConfig

    def built(config: RunConfig) -> None:
        raise Built(config)

    if command == "serve":
        pytest.importorskip("litserve")  # graphctx[serve]
    monkeypatch.setattr(RunConfig, "__post_init__", built)
    main, argv = override_invocations(tmp_path)[command]
    with pytest.raises(Built) as stopped:
        main(argv)
    assert stopped.value.args[0].retrieval.top_k == 3


def test_plan_shows_an_override(capsys):
    assert cli_main(["plan", "--config", str(TINY), *OVERRIDE, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["retrieval"]["top_k"] == 3


def test_a_mistyped_key_or_a_wrong_value_is_one_line_naming_it(capsys):
    assert cli_main(["plan", "--config", str(TINY), "--retrieval.top_kk", "3"]) == 1
    assert capsys.readouterr().err == f"error: {TINY}: unrecognized arguments: --retrieval.top_kk 3\n"
    assert evaluate.main(["--config", str(TINY), "--retrieval.top_k", "three"]) == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert line.startswith(f'error: {TINY}: Parser key "retrieval.top_k": Expected a <class')
    assert line.endswith("Got value: three")


def test_a_mistyped_option_of_the_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        cli_main(["plan", "--config", str(TINY), "--jsn"])
    assert exited.value.code == 2
    assert "error: unrecognized arguments: --jsn" in capsys.readouterr().err


@pytest.mark.parametrize("old", ["--cache-dir", "--top-k", "--adapter"])
def test_an_old_spelling_is_one_line_naming_the_new_one(old, capsys):
    assert cli_main(["retrieve", "--config", str(TINY), *QUESTION, old, "x"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {old}: renamed --") and ("--cache_dir" in line) == (old == "--cache-dir")


@pytest.mark.parametrize("main", [cli_main, train.main, evaluate.main])
def test_version(main, capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.split()[-1] == version("graphctx")


def test_evaluate_variants_take_what_the_config_takes(monkeypatch, tmp_path):
    """``--variants`` is ``evaluation.variants``: a baseline, a retriever row, a plug-in retriever's row
    (``last_first``, :func:`test_retrievers.write_plugin`) are taken as the config takes them."""
    from test_retrievers import write_plugin

    from graphctx.pipeline import config_file

    def checked(*args, **kwargs) -> None:  # the whole check, plug-ins imported, then stop
        raise Built(run_config(*args, **kwargs))

    run_config = config_file.run_config
    monkeypatch.syspath_prepend(str(write_plugin(tmp_path)))
    monkeypatch.setattr(config_file, "run_config", checked)
    plugin = ["--retrieval.extra", '[{"class_path": "myretrievers.LastFirst"}]']
    variants = ["TextGen@dense", "GenQA", "Base-TextGen@last_first"]
    with pytest.raises(Built) as stopped:
        evaluate.main(["--config", str(TINY), *plugin, "--variants", *variants])
    assert stopped.value.args[0].evaluation.variants == variants


def test_evaluate_variants_are_refused_with_the_config_s_error(capsys):
    assert evaluate.main(["--config", str(TINY), "--variants", "TextGen@overlap"]) == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert "evaluation.variants: unknown retriever 'overlap'" in line


def test_evaluate_metrics_name_unknown_ones_with_the_choices(capsys, tmp_path):
    argv = [
        "--config",
        str(TINY),
        "--metrics",
        "rouge",
        "nope",
        "--evaluation.output_dir",
        str(tmp_path / "eval"),
    ]
    assert evaluate.main(argv) == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert line == (
        "error: --metrics: unknown metric(s) ['nope']; choose from "
        "['rouge', 'bertscore', 'fact_score', 'entity_jaccard', 'autoais']"
    )
