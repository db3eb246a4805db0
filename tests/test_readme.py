"""The README's first screen: its two fresh-machine commands stay in step with CI, it stays a front page whose
links resolve, and its results say what run made them. The figures it used to state are in docs/, checked by
tests/test_docs.py."""

from __future__ import annotations

import re

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


def test_the_readme_is_a_front_page_whose_links_resolve():
    """About 150 lines, no wall of a table cell (the issue's 1,000-character cells moved to docs/), and every
    relative link names a file of the repository (the docs pages read on GitHub too)."""
    text = (REPO_ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    cells = [cell for line in text.splitlines() if line.startswith("|") for cell in line.split("|")]
    assert max(len(cell) for cell in cells) <= 300
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert links
    for link in links:
        if not link.startswith("http"):
            assert (REPO_ROOT / link).is_file(), link


def test_the_readme_results_say_what_run_made_them():
    """The results table comes with the command that reproduces it and says it is not the paper's."""
    section = (REPO_ROOT / "README.md").read_text().split("## Results on the tiny default", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert "python evaluate.py --config configs/tiny.yaml" in section
    assert "not the paper's" in section and "| Variant |" in section


def test_the_readme_results_table_is_rendered_from_a_results_file(monkeypatch):
    """scripts/readme_figures.py's ``--results``: means and intervals to two places, the bootstrap-mid
    columns dropped, n in a column of its own."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "scripts"))
    import readme_figures

    results = (
        "## Results\n\n| Variant | ROUGE-1 | ROUGE-1 (bootstrap mid, as evaluate) |\n|---|---|---|\n"
        "| TextGen | 0.1899 [0.1484, 0.2305] (n=20) | 0.1902 |\n\nDifference ..."
    )
    assert readme_figures.results_table(results).splitlines() == [
        "| Variant | ROUGE-1 | n |",
        "|---|---|---|",
        "| TextGen | 0.19 [0.15, 0.23] | 20 |",
    ]


def test_the_readme_results_are_the_committed_run_of_the_whole_test_split(monkeypatch):
    """The README's two tables (means, paired tests) are scripts/readme_figures.py's rendering of the
    committed results.md of the whole default matrix on the tiny config's first 20 test questions."""
    monkeypatch.syspath_prepend(str(REPO_ROOT / "scripts"))
    import readme_figures

    results = (REPO_ROOT / "docs" / "results" / "tiny-20.md").read_text()
    readme = (REPO_ROOT / "README.md").read_text()
    assert readme_figures.readme_results(results) in readme
    rows = readme_figures.results_table(results).splitlines()[2:]
    assert len(rows) == 12  # the paper's variants
    assert all("20" in row.rsplit("|", 2)[1].strip().split("/") for row in rows)  # evaluation.limit
    assert "docs/results/tiny-20.md" in readme
