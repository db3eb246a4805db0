"""The README's fresh-machine commands and CI stay in step."""

from __future__ import annotations

import json
import re

import pytest
from conftest import REPO_ROOT


def _readme_commands() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line for block in blocks[:2] for line in block.splitlines() if line and not line.startswith("#")]


def test_first_screen_has_exactly_two_commands_train_then_test():
    commands = _readme_commands()
    assert len(commands) == 2
    assert "torch==2.13.0" in commands[0] and "python train.py --config configs/tiny.yaml" in commands[0]
    assert commands[1].endswith("pytest -q")
    assert (REPO_ROOT / "configs" / "tiny.yaml").is_file()


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert _readme_commands()[1] in ci.splitlines()


def test_evaluate_help_and_the_readme_name_the_same_paired_tests():
    """Both state the default comparisons from one source (graphctx.evaluation_settings.TEXT_TWINS); the
    help used to say "against the best baseline"."""
    import evaluate
    from graphctx.evaluation_settings import comparisons_text

    pairs = comparisons_text()
    help_text = " ".join(evaluate.build_parser().format_help().split())
    assert pairs in help_text and "best baseline" not in help_text
    assert pairs in (REPO_ROOT / "README.md").read_text()
    assert "`runs/tiny/eval/`" in (REPO_ROOT / "README.md").read_text()  # evaluate.py's default folder


def test_the_readme_states_the_figures_scripts_readme_figures_computes(smollm2_folder, tmp_path, monkeypatch):
    """The tiny config's rows per split, computed from its data by scripts/readme_figures.py (the SmolLM2
    tokenizer is the session's converted copy), stated by the README (the pool was 298 there, then 293)."""
    from graphctx.pipeline.config_file import load_config

    monkeypatch.chdir(REPO_ROOT)  # the config's paths are relative to the repository root
    monkeypatch.syspath_prepend(str(REPO_ROOT / "scripts"))
    import readme_figures

    source = ["--model.spec.source", str(smollm2_folder)]  # the packaged GGUF, converted once per session
    config = load_config(readme_figures.TINY, [*source, "--cache_dir", str(tmp_path)])
    readme = " ".join((REPO_ROOT / "README.md").read_text().split())
    for phrase in readme_figures.split_phrases(readme_figures.split_sizes(config)):
        assert phrase in readme


@pytest.mark.slow
def test_the_readme_states_the_t_sweep_scripts_readme_figures_computes(tmp_path, monkeypatch, capsys):
    """The T-sweep sentence of "Choosing T" from `graphctx retrieval-eval` on the tiny config (its MiniLM
    embeddings cached, as tests/test_retrieval_eval.py's run caches them): it said the graph equals dense
    from T = 0.6, which holds from 0.65."""
    from graphctx.cli import main

    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.syspath_prepend(str(REPO_ROOT / "scripts"))
    import readme_figures

    argv = ["retrieval-eval", "--config", readme_figures.TINY, "--json", "--output-dir", str(tmp_path)]
    assert main([*argv, "--thresholds", readme_figures.SWEEP]) == 0
    readme = " ".join((REPO_ROOT / "README.md").read_text().split())
    for phrase in readme_figures.sweep_phrases(json.loads(capsys.readouterr().out)):
        assert phrase in readme
