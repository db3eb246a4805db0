"""A knowledge source whose facts reach none of the contexts is named in the same one warning line by every
command that enhances a context: ``graphctx enhance``, ``graphctx answer``, evaluate.py, and ``graphctx
serve`` once, on its first answers (not at start-up, not on every request)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from evaluation_workspace import write_workspace
from test_serve import free_port

import evaluate
from graphctx.cli import main as cli_main

pytestmark = pytest.mark.slow

SILENT = '''
from graphctx.knowledge.backends import Node, PluginSource, Triple


class Unheard(PluginSource):
    """Facts about things no question mentions."""

    name = "unheard"

    def triples(self):
        yield Triple(Node("zq1", "Zorblax"), Node("r", "runs on"), Node("zq2", "Quuxium"))
'''
QUESTION = "How do I delegate my ADA to a stake pool from Daedalus?"


def warning(questions: int) -> str:
    return (
        f"warning: knowledge source unheard (silentkg.Unheard) gave no fact to any of the {questions} "
        "enhanced questions: no mention linked to its labels or aliases, or none of its facts reached "
        "another entity of a context"
    )


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, cardano_dir, tiny_bert) -> tuple[Path, Path]:
    """(the tiny workspace's config with the silent source in ``knowledge.also``, the plug-in's folder)."""
    root = tmp_path_factory.mktemp("silent")
    plugins = root / "plugins"
    plugins.mkdir()
    (plugins / "silentkg.py").write_text(SILENT)
    generation = {"max_new_tokens": 3, "batch_size": 2, "max_prompt_tokens": 320}
    evaluation = {"output_dir": str(root / "out"), "limit": 2, "variants": ["Base-GraphContextGen"]}
    knowledge = {"token_budget": 160, "also": ["unheard"], "extra": [{"class_path": "silentkg.Unheard"}]}
    config = write_workspace(
        root, cardano_dir, tiny_bert, "silent.yaml", evaluation, generation=generation, knowledge=knowledge
    )
    return config, plugins


def lines_of(text: str, line: str) -> int:
    """How many lines of ``text`` are ``line`` (evaluate.py's log stamps come first)."""
    return sum(row.endswith(line) for row in text.splitlines())


@pytest.mark.parametrize("command", ["enhance", "answer"])
def test_a_one_question_command_names_the_silent_source_once(workspace, command, capsys, monkeypatch):
    config, plugins = workspace
    monkeypatch.syspath_prepend(str(plugins))
    capsys.readouterr()
    assert cli_main([command, "--config", str(config), "--question", QUESTION, "--json"]) == 0
    assert lines_of(capsys.readouterr().err, warning(1)) == 1


def test_evaluate_names_the_silent_source_once(workspace, capsys, monkeypatch):
    config, plugins = workspace
    monkeypatch.syspath_prepend(str(plugins))
    capsys.readouterr()
    assert evaluate.main(["--config", str(config)]) == 0
    assert lines_of(capsys.readouterr().err, warning(2)) == 1


def test_serve_names_the_silent_source_once_on_its_first_answers(workspace, tmp_path):
    config, plugins = workspace
    port, log_path = free_port(), tmp_path / "server.log"
    argv = [sys.executable, "-m", "graphctx.cli", "serve", "--config", str(config), "--port", str(port)]
    argv += ["--pool-dir", str(tmp_path / "pool")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugins), os.environ.get("PYTHONPATH", "")])}
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "w") as log:
        server = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 600
            while "serving on" not in log_path.read_text():
                assert server.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
                time.sleep(1)
            assert lines_of(log_path.read_text(), warning(1)) == 0  # nothing enhanced yet
            for question in (QUESTION, "Why is my cardano-node stuck syncing?"):
                response = httpx.post(f"{url}/v1/answer", json={"question": question}, timeout=300)
                assert response.status_code == 200, response.text
            time.sleep(1)  # the worker's stderr reaches the log
            assert lines_of(log_path.read_text(), warning(1)) == 1, log_path.read_text()[-3000:]
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.pid, signal.SIGKILL)
