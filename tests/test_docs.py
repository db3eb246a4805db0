"""The documentation site (mkdocs.yml, docs/): it builds strictly (a broken link, a missing page or anchor
fails), every command has a page with its generated usage, its code blocks parse as the README's did (config
snippets load, command lines parse, scripts exist), and the figures it states are the ones
scripts/readme_figures.py computes."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import docs_pages  # scripts/ is not a package

DOCS = REPO_ROOT / "docs"
OTHERS = ("extending/", "scale.md")
"""Pages other engineers write (the plug-in contracts, the scale modes); their own tests run their blocks."""


def pages() -> list[Path]:
    """Every Markdown page of the site, those written elsewhere left out."""
    return [p for p in sorted(DOCS.rglob("*.md")) if not str(p.relative_to(DOCS)).startswith(OTHERS)]


def blocks(language: str) -> list[tuple[str, str]]:
    """(page, code) of every fenced block of ``language`` in :func:`pages`."""
    found = []
    for page in pages():
        for code in re.findall(rf"^```{language}\n(.*?)^```", page.read_text(), flags=re.S | re.M):
            found.append((str(page.relative_to(REPO_ROOT)), code))
    return found


def command_lines() -> list[tuple[str, list[str]]]:
    """(page, argv) of every line of a ``bash`` block, continuation lines joined, comments dropped."""
    lines = []
    for page, code in blocks("bash"):
        for line in code.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append((page, shlex.split(line, comments=True)))
    return lines


def mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``."""
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor
    return subprocess.run(
        argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False
    )


@pytest.mark.slow
def test_the_site_builds_strictly_with_every_command_and_setting(tmp_path):
    """The real build, hook included: every command page holds its ``--help`` usage, the reference every
    key ``--help`` documents."""
    done = mkdocs(REPO_ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-4000:]
    for command in docs_pages.commands():
        html = (tmp_path / "site" / "commands" / docs_pages.page_name(command) / "index.html").read_text()
        prog = command.removeprefix("python ")
        assert f"usage: {prog}" in html, command
    reference = (tmp_path / "site" / "reference" / "config" / "index.html").read_text()
    for section in docs_pages.reference_sections():
        for setting in section.settings:
            assert f"<code>{setting.key}</code>" in reference, setting.key


def inherited_site(tmp_path: Path, broken: str) -> Path:
    """A config inheriting mkdocs.yml (its validation settings) over a copy of docs/ whose index page gains
    ``broken``; no hook and no API pages, so the build takes seconds."""
    docs = tmp_path / "docs"
    shutil.copytree(DOCS, docs)
    (docs / "index.md").write_text((docs / "index.md").read_text() + f"\n{broken}\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text(f"INHERIT: {REPO_ROOT / 'mkdocs.yml'}\ndocs_dir: docs\nhooks: []\nplugins: [search]\n")
    return config


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        ("[gone](no-such-page.md)", "contains a link 'no-such-page.md', but the target is not found"),
        ("[gone](performance.md#no-such-anchor)", "does not contain an anchor '#no-such-anchor'"),
    ],
)
def test_a_broken_link_or_anchor_fails_the_build(tmp_path, broken, message):
    config = inherited_site(tmp_path, "")
    assert mkdocs(config, tmp_path / "ok").returncode == 0  # the copy builds as it is
    config = inherited_site(tmp_path / "broken", broken)
    done = mkdocs(config, tmp_path / "site")
    assert done.returncode == 1 and message in done.stderr, done.stderr[-2000:]


def test_every_command_has_a_page_in_the_nav_with_its_usage_marker():
    nav = (REPO_ROOT / "mkdocs.yml").read_text()
    for command in docs_pages.commands():
        name = f"commands/{docs_pages.page_name(command)}.md"
        assert f"<!-- usage: {command} -->" in (DOCS / name).read_text(), name
        assert f": {name}\n" in nav, name
    assert docs_pages.REFERENCE in (DOCS / "reference" / "config.md").read_text()


def test_the_install_page_gives_the_readmes_two_commands():
    readme = re.findall(r"```bash\n(.*?)```", (REPO_ROOT / "README.md").read_text(), flags=re.S)[:2]
    install = [code for page, code in blocks("bash") if page == "docs/install.md"]
    assert [b.splitlines()[-1] for b in readme] == [b.strip() for b in install]


def test_every_yaml_block_is_a_config_section(tmp_path, monkeypatch):
    """A YAML block merged into configs/tiny.yaml loads and validates like a config file."""
    from graphctx.pipeline.config_file import load_config

    monkeypatch.chdir(REPO_ROOT)
    snippets = blocks("yaml")
    assert snippets
    for n, (page, code) in enumerate(snippets):
        config = yaml.safe_load((REPO_ROOT / "configs" / "tiny.yaml").read_text())
        for section, values in yaml.safe_load(code).items():
            config.setdefault(section, {}).update(values)
        path = tmp_path / f"{n}.yaml"
        path.write_text(yaml.safe_dump(config))
        try:
            load_config(path, devices=False)
        except Exception as error:  # any failure, named with its page
            pytest.fail(f"{page}: its YAML block does not load: {error}")


def test_every_command_line_parses(monkeypatch):
    """``graphctx …`` and ``python evaluate.py …`` lines parse with the commands' own parsers (the one parser
    of every entry point, graphctx.command_line), and a config they read loads with its dotted overrides;
    ``python train.py`` lines' configs load with their overrides; ``sbatch`` and ``benchmarks/`` scripts and
    every ``configs/`` file named exist."""
    import evaluate
    from graphctx.cli import subcommand_parser
    from graphctx.command_line import parse, reads_config
    from graphctx.pipeline.config_file import load_config, run_config

    monkeypatch.chdir(REPO_ROOT)  # the configs named are relative to the repository root
    checked = 0
    for page, argv in command_lines():
        words = argv[next(i for i, w in enumerate(argv) if "=" not in w) :]  # OMP_NUM_THREADS=1 python …
        for word in words:
            if word.startswith("configs/"):
                assert (REPO_ROOT / word).is_file(), f"{page}: {word}"
        if words[0] == "graphctx" or words[:2] == ["python", "evaluate.py"]:
            parser = subcommand_parser(words[1]) if words[0] == "graphctx" else evaluate.build_parser()
            rest = words[2:]
            if words[1] == "annotate":  # its actions are subcommands of their own
                parser, rest = parser._subcommands_action.choices[words[2]], words[3:]
            try:
                args = parse(parser, rest)
                if reads_config(parser) and args.get("config"):
                    run_config(args, devices=False)
            except (Exception, SystemExit) as error:  # any failure, named with its page and line
                pytest.fail(f"{page}: {' '.join(argv)}: {error!r}")
        elif words[:2] == ["python", "train.py"]:
            config = words[words.index("--config") + 1]
            overrides = [w for w in words[2:] if w not in ("--config", config)]
            load_config(REPO_ROOT / config, overrides, devices=False)
        elif words[0] == "sbatch" or (words[0] == "python" and words[1].startswith("benchmarks/")):
            script = next(w for w in words if w.startswith(("scripts/", "benchmarks/")))
            assert (REPO_ROOT / script).is_file(), f"{page}: {script}"
        else:
            continue
        checked += 1
    assert checked >= 40


def test_the_evaluate_page_and_help_name_the_same_paired_tests():
    """Both state the default comparisons from one source (graphctx.evaluation_settings.TEXT_TWINS); the
    help used to say "against the best baseline"."""
    import evaluate
    from graphctx.evaluation_settings import comparisons_text

    pairs = comparisons_text()
    help_text = " ".join(evaluate.build_parser().format_help().split())
    page = " ".join((DOCS / "commands" / "evaluate.md").read_text().split())
    assert pairs in help_text and "best baseline" not in help_text
    assert pairs in page
    assert "`runs/tiny/eval/`" in page  # evaluate.py's default folder


def test_the_configuration_page_states_the_split_sizes(smollm2_folder, tmp_path, monkeypatch):
    """The tiny config's rows per split, computed from its data by scripts/readme_figures.py (the SmolLM2
    tokenizer is the session's converted copy), stated by docs/configuration.md (the pool was 298, then
    293)."""
    from graphctx.pipeline.config_file import load_config

    monkeypatch.chdir(REPO_ROOT)  # the config's paths are relative to the repository root
    import readme_figures

    source = ["--model.spec.source", str(smollm2_folder)]  # the packaged GGUF, converted once per session
    config = load_config(readme_figures.TINY, [*source, "--cache_dir", str(tmp_path)])
    for page, phrases in readme_figures.page_phrases(split=readme_figures.split_sizes(config)).items():
        text = " ".join((REPO_ROOT / page).read_text().split())
        for phrase in phrases:
            assert phrase in text, page


@pytest.mark.slow
def test_the_retrieval_eval_page_states_the_t_sweep(tmp_path, monkeypatch, capsys):
    """The T-sweep sentence of "Choosing T" from `graphctx retrieval-eval` on the tiny config (its MiniLM
    embeddings cached, as tests/test_retrieval_eval.py's run caches them): it said the graph equals dense
    from T = 0.6, which holds from 0.65."""
    from graphctx.cli import main

    monkeypatch.chdir(REPO_ROOT)
    import readme_figures

    argv = [
        "retrieval-eval",
        "--config",
        readme_figures.TINY,
        "--json",
        "--evaluation.retrieval_eval_dir",
        str(tmp_path),
    ]
    assert main([*argv, "--thresholds", readme_figures.SWEEP]) == 0
    sweep = json.loads(capsys.readouterr().out)
    for page, phrases in readme_figures.page_phrases(sweep=sweep).items():
        text = " ".join((REPO_ROOT / page).read_text().split())
        for phrase in phrases:
            assert phrase in text, page
