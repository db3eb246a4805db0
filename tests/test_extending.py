"""The examples of docs/extending/ run as written: each page's plug-in module, saved where the page says,
and its config lines, merged into a workspace config, run by the page's command; the plug-in metric is
scored by evaluate.py into its own score file, table column and paired test, the knowledge source's facts
are labelled with its name; and a broken plug-in is one line naming the setting."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from evaluation_workspace import write_workspace

from graphctx.errors import ConfigError
from graphctx.evaluation.jsonl import read_records
from graphctx.pipeline.config_file import load_config
from graphctx.stack.model_stack import ModelStack
from graphctx.stack.report import plan_json, plan_text

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY = REPO_ROOT / "configs" / "tiny.yaml"
DOCS = REPO_ROOT / "docs" / "extending"
EXAMPLE = "## A complete example"
PAGES = ["knowledge-sources.md", "metrics.md", "retrievers.md", "extractors.md", "attribution.md"]


@dataclass(frozen=True)
class Example:
    """A docs page's complete example: where its module goes, the module, its config lines, its command."""

    module: str
    python: str
    config: dict[str, Any]
    command: list[str]


def page_example(page: str) -> Example:
    """The ``## A complete example`` section of ``docs/extending/<page>``."""
    section = (DOCS / page).read_text().split(EXAMPLE, 1)[1].split("\n## ", 1)[0]
    module = re.search(r"save this as\s+`([\w/]+\.py)`", section, re.I).group(1)
    python = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    config = yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))
    command = shlex.split(re.search(r"```bash\n(.*?)```", section, re.S).group(1))
    return Example(module, python, config, command)


def merged(base: dict[str, Any], lines: dict[str, Any]) -> dict[str, Any]:
    """``base`` with a page's config ``lines`` written over it, section by section."""
    out = dict(base)
    for key, value in lines.items():
        out[key] = merged(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def save_module(root: Path, example: Example) -> None:
    """The example's module at its path under ``root``, each package folder with an ``__init__.py``."""
    path = root / example.module
    path.parent.mkdir(parents=True, exist_ok=True)
    for folder in path.relative_to(root).parents:
        if folder != Path("."):
            (root / folder / "__init__.py").touch()
    path.write_text(example.python)


def run_command(example: Example, config: Path, plugins: Path) -> subprocess.CompletedProcess:
    """The page's command as written, ``my.yaml`` being ``config``, with ``plugins`` on the PYTHONPATH."""
    program, *args = [str(config) if word == "my.yaml" else word for word in example.command]
    runner = {"graphctx": [str(Path(sys.executable).parent / "graphctx")], "python": [sys.executable]}[
        program
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugins), str(REPO_ROOT)])}
    return subprocess.run(
        [*runner, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900
    )


def test_every_page_has_a_complete_example_and_links_that_exist():
    pages = sorted(path.name for path in DOCS.glob("*.md"))
    assert pages == sorted(["index.md", *PAGES])
    for page in PAGES:
        example = page_example(page)
        assert example.command[0] in ("graphctx", "python") and "my.yaml" in example.command
        compile(example.python, example.module, "exec")
    for page in pages:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", (DOCS / page).read_text()):
            assert target.startswith("http") or (DOCS / target).resolve().exists(), (page, target)


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    """A folder holding ``mypkg/metrics.py`` exactly as docs/extending/metrics.md gives it."""
    root = tmp_path_factory.mktemp("plugin")
    save_module(root, page_example("metrics.md"))
    return root


@pytest.mark.slow
def test_the_docs_plugin_metric_is_scored_like_a_built_in(tmp_path, plugin_path, cardano_dir, tiny_bert):
    evaluation = {
        "output_dir": str(tmp_path / "out"),
        "limit": 2,
        "variants": ["TextGen", "TextGen@bm25"],  # and BM25 answering, compared with TextGen by default
        "bootstrap_samples": 50,
        "permutation_samples": 50,
    }
    generation = {"max_new_tokens": 6, "batch_size": 2, "max_prompt_tokens": 320}
    config_file = write_workspace(
        tmp_path, cardano_dir, tiny_bert, "tiny.yaml", evaluation, generation=generation
    )
    example = page_example("metrics.md")
    config_file.write_text(yaml.safe_dump(merged(yaml.safe_load(config_file.read_text()), example.config)))
    done = run_command(example, config_file, plugin_path)
    assert done.returncode == 0, done.stderr[-3000:]

    out = tmp_path / "out"
    for variant in ("TextGen", "TextGen@bm25"):
        answers = {r["id"]: r["generated"] for r in read_records(out / "predictions" / f"{variant}.jsonl")}
        scored = {
            r["id"]: r["answer_words"] for r in read_records(out / "scores" / variant / "answer_length.jsonl")
        }
        assert scored == {i: min(len(text.split()), 100) for i, text in answers.items()}
        meta = (out / "scores" / variant / "answer_length.meta.json").read_text()
        assert "mypkg.metrics.AnswerLength" in meta and "source_sha256" in meta
    results = (out / "results.md").read_text()
    header = next(line for line in results.splitlines() if line.startswith("| Variant | vs |"))
    assert header.endswith("| Answer words |")  # its column, in the paired test of BM25 against TextGen
    assert any(line.startswith("| TextGen (bm25) | TextGen |") for line in results.splitlines())
    assert "- answer_length: mypkg.metrics.AnswerLength (a plug-in metric, beyond the paper)" in results

    # a rerun finds every score, the plug-in's included, and scores nothing again
    again = run_command(example, config_file, plugin_path)
    assert again.returncode == 0 and "loading the" not in again.stderr, again.stderr[-2000:]

    # an edit of another module of the plug-in's package re-scores the plug-in's metric, and only it
    (plugin_path / "mypkg" / "__init__.py").write_text("WORDS = 'edited'\n")
    edited = run_command(example, config_file, plugin_path)
    assert edited.returncode == 0, edited.stderr[-2000:]
    moved = sorted(p.relative_to(out / "stale").parts[1:] for p in (out / "stale").rglob("*.jsonl"))
    assert [parts for parts in moved if parts[-1] != "moved.jsonl"] == [
        ("scores", variant, "answer_length.jsonl") for variant in ("TextGen", "TextGen@bm25")
    ]


def test_the_plan_lists_a_plugin_as_an_extension(plugin_path, monkeypatch):
    monkeypatch.syspath_prepend(str(plugin_path))
    extra = '[{"class_path": "mypkg.metrics.AnswerLength", "init_args": {"max_words": 5}}]'
    plan = ModelStack(load_config(TINY, ["--evaluation.metrics.extra", extra]))
    assert [entry.name for entry in plan.metrics][-1] == "answer_length"
    assert plan.metrics[-1].max_words == 5
    extensions = {item["key"]: item["what"] for item in plan_json(plan)["extensions"]}
    assert extensions["evaluation.metrics.answer_length"].startswith("mypkg.metrics.AnswerLength")
    assert "extension    evaluation.metrics.answer_length: mypkg.metrics.AnswerLength" in plan_text(plan)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ('{"class_path": "nopkg.Missing"}', "extra[0]: cannot import 'nopkg'"),
        ('{"class_path": "graphctx.errors.ConfigError"}', "not a graphctx.metrics.registry.MetricEntry"),
        ('{"class_path": "mypkg.metrics.AnswerLength", "init_args": {"maxwords": 1}}', "bad init_args"),
        ('{"class_path": "mypkg.metrics.AnswerLength", "args": {}}', "unknown key(s) ['args']"),
        ('{"init_args": {}}', "expected {class_path: package.module.Class"),
    ],
)
def test_a_broken_plugin_is_one_line_naming_the_setting(plugin_path, monkeypatch, item, message):
    monkeypatch.syspath_prepend(str(plugin_path))
    with pytest.raises(ConfigError) as error:
        load_config(TINY, ["--evaluation.metrics.extra", f"[{item}]"])
    text = str(error.value)
    assert "\n" not in text and "evaluation.metrics.extra[0]" in text and message in text, text


def test_a_plugin_name_may_not_take_a_built_in_metrics_place(tmp_path, monkeypatch):
    (tmp_path / "clash.py").write_text(
        "from graphctx.metrics.registry import RowMetric\n\n"
        "class Clash(RowMetric):\n    name = 'rouge'\n    columns = {'x': 'X'}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"extra\[0\]: name 'rouge' of clash.Clash is taken"):
        load_config(TINY, ["--evaluation.metrics.extra", '[{"class_path": "clash.Clash"}]'])


def test_a_metric_entry_must_give_a_scorer_and_a_fingerprint(tmp_path, monkeypatch):
    """The contract of a MetricEntry is name, columns, scorer() and fingerprint(): the rest has defaults."""
    (tmp_path / "bare.py").write_text(
        "from graphctx.metrics.registry import MetricEntry\n\n"
        "class Bare(MetricEntry):\n    name = 'bare'\n    columns = {'x': 'X'}\n\n"
        "    def fingerprint(self):\n        return {}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        ConfigError, match=r"extra\[0\]: bare\.Bare gives no scorer\(\) \(a MetricEntry gives"
    ):
        load_config(TINY, ["--evaluation.metrics.extra", '[{"class_path": "bare.Bare"}]'])


def _plugin_package(root: Path) -> Path:
    """``helpful/metric.py`` whose metric scores with ``helpful/words.py``'s helper."""
    package = root / "helpful"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "words.py").write_text("def count(text):\n    return len(text.split())\n")
    (package / "metric.py").write_text(
        "from graphctx.metrics.registry import RowMetric\n"
        "from helpful.words import count\n\n"
        "class Words(RowMetric):\n"
        "    name = 'words'\n"
        "    columns = {'words': 'Words'}\n\n"
        "    def score_rows(self, questions, generated, gold, premises):\n"
        "        return {'words': [count(text) for text in generated]}\n"
    )
    return package


def test_editing_a_module_a_plugin_imports_changes_its_fingerprint(tmp_path, monkeypatch):
    package = _plugin_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    extra = '[{"class_path": "helpful.metric.Words"}]'
    entry = ModelStack(load_config(TINY, ["--evaluation.metrics.extra", extra])).metrics[-1]
    before = entry.fingerprint()
    (package / "words.py").write_text("def count(text):\n    return len(text)\n")  # characters now
    after = entry.fingerprint()
    assert after["source_sha256"] != before["source_sha256"]

    from graphctx.plugins import package_sources

    assert sorted(package_sources("helpful.metric.Words")) == [
        "helpful/__init__.py",
        "helpful/metric.py",
        "helpful/words.py",
    ]
    (tmp_path / "single.py").write_text("from helper import x\n")  # a top-level module and its neighbour
    (tmp_path / "helper.py").write_text("x = 1\n")
    first = package_sources("single.Thing")
    (tmp_path / "helper.py").write_text("x = 2\n")
    assert set(first) == {"single.py", "helper.py"} and package_sources("single.Thing") != first


@pytest.mark.parametrize(
    ("scores", "problem"),
    [
        ("{'x': [1.0] * len(generated)}", "score_rows() wrote ['x']; its columns are ['x', 'y']"),
        ("{'x': [1.0], 'y': [1.0]}", "score_rows() gave 1 x scores for 2 rows"),
        ("{'x': [math.inf] * 2, 'y': [1.0] * 2}", "score_rows()'s x scores hold an infinite value"),
        ("{'x': ['high'] * 2, 'y': [1.0] * 2}", "score_rows()'s x score 'high' is not a number"),
        ("[1.0, 2.0]", "score_rows() returned list, not a mapping of columns"),
        ("1 / 0", "raised ZeroDivisionError: division by zero"),
    ],
)
def test_a_plugin_metrics_wrong_scores_are_one_line_naming_it(tmp_path, monkeypatch, scores, problem):
    (tmp_path / "badmetric.py").write_text(
        "import math\nfrom graphctx.metrics.registry import RowMetric\n\n"
        "class Bad(RowMetric):\n    name = 'bad'\n    columns = {'x': 'X', 'y': 'Y'}\n\n"
        f"    def score_rows(self, questions, generated, gold, premises):\n        return {scores}\n"
    )
    monkeypatch.delitem(sys.modules, "badmetric", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    extra = '[{"class_path": "badmetric.Bad"}]'
    entry = ModelStack(load_config(TINY, ["--evaluation.metrics.extra", extra])).metrics[-1]
    score = entry.scorer(None, None, None, None)
    with pytest.raises(ConfigError) as error:
        score(["q1", "q2"], ["a b", "c"], ["g1", "g2"], [None, None])
    assert str(error.value) == f"evaluation.metrics.extra bad (badmetric.Bad): {problem}"
    (tmp_path / "badmetric.py").write_text("")


def test_a_plugin_metric_nan_on_every_row_warns(tmp_path, monkeypatch):
    from graphctx.evaluation.matrix.table import ResultsTable, TableRow
    from graphctx.evaluation.matrix.unscored import unscored_warnings
    from graphctx.metrics.stats import Interval
    from graphctx.prompts import VARIANTS

    (tmp_path / "nanmetric.py").write_text(
        "import math\nfrom graphctx.metrics.registry import RowMetric\n\n"
        "class Nan(RowMetric):\n    name = 'nan'\n    columns = {'x': 'X'}\n\n"
        "    def score_rows(self, questions, generated, gold, premises):\n"
        "        return {'x': [math.nan] * len(generated)}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = load_config(TINY, ["--evaluation.metrics.extra", '[{"class_path": "nanmetric.Nan"}]'])
    scores = config.metric_entries[-1].scorer(None, None, None, None)(
        ["q"] * 3, ["a"] * 3, ["g"] * 3, [None] * 3
    )
    assert all(math.isnan(v) for v in scores["x"])  # NaN is "not scored", not an error
    empty, scored = Interval(math.nan, math.nan, math.nan, 0), Interval(0.5, 0.4, 0.6, 3)
    rows = [
        TableRow(VARIANTS["TextGen"], {"x": empty, "rouge1": scored}, answered=3),
        TableRow(VARIANTS["GraphGen"], {"x": scored, "rouge1": scored}, answered=3),
    ]
    assert unscored_warnings(ResultsTable(rows, ["rouge1", "x"]), config.metric_entries) == [
        "warning: evaluation.metrics.extra nan (nanmetric.Nan): x is NaN (not scored) on every one of the "
        "3 rows of TextGen"
    ]


@pytest.fixture(scope="module")
def docs_workspace(tmp_path_factory, cardano_dir, tiny_bert) -> tuple[Path, Path]:
    """(a workspace config on the recent cardano questions, a folder holding every page's module)."""
    root = tmp_path_factory.mktemp("docs-examples")
    plugins = root / "plugins"
    for page in PAGES:
        save_module(plugins, page_example(page))
    evaluation = {
        "output_dir": str(root / "out"),
        "limit": 2,
        "variants": ["TextGen"],
        "bootstrap_samples": 50,
    }
    generation = {"max_new_tokens": 4, "batch_size": 2, "max_prompt_tokens": 320}
    knowledge = {"token_budget": 600}  # room for several retrieved pairs and their facts
    config = write_workspace(
        root, cardano_dir, tiny_bert, "base.yaml", evaluation, generation=generation, knowledge=knowledge
    )
    return config, plugins


def page_config(page: str, base: Path) -> tuple[Example, Path]:
    """A page's example and ``base`` with its config lines merged in, saved beside it."""
    example = page_example(page)
    path = base.with_name(page.replace(".md", ".yaml"))
    path.write_text(yaml.safe_dump(merged(yaml.safe_load(base.read_text()), example.config)))
    return example, path


@pytest.mark.slow
def test_the_docs_knowledge_source_labels_its_facts_with_its_name(docs_workspace):
    base, plugins = docs_workspace
    example, config = page_config("knowledge-sources.md", base)
    done = run_command(example, config, plugins)
    assert done.returncode == 0, done.stderr[-3000:]
    context = json.loads(done.stdout)
    sources = {fact["source"] for fact in context["facts"]}
    assert "kg:glossary" in sources, sources  # its name, not kg:local
    glossary = [s for s in context["sentences"] if "kg:glossary" in s["triplet"]["source"]]
    assert glossary and all(
        s["triplet"]["source"] in ("kg:glossary", "kg:local+kg:glossary") for s in glossary
    )


@pytest.mark.slow
def test_the_docs_extractor_and_retriever_run_as_written(docs_workspace):
    base, plugins = docs_workspace
    example, config = page_config("extractors.md", base)
    done = run_command(example, config, plugins)
    assert done.returncode == 0, done.stderr[-3000:]
    extracted = json.loads(done.stdout)["extracted"]
    programs = [t for t in extracted if t["relation"] == "instance of"]
    assert programs and all(t["source"].startswith("programs@pair=") for t in programs), extracted  # its name
    assert {t["tail"] for t in programs} == {"command-line program"}  # its init_args

    example, config = page_config("retrievers.md", base)
    done = run_command(example, config, plugins)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["method"] == "overlap" and found["hits"]
    assert all(
        hit["score"] >= example.config["retrieval"]["extra"][0]["init_args"]["min_shared"]
        for hit in found["hits"]
    )
    assert [hit["score"] for hit in found["hits"]] == sorted(
        (hit["score"] for hit in found["hits"]), reverse=True
    )


@pytest.mark.slow
def test_the_docs_attribution_architecture_attributes_every_answer(docs_workspace):
    base, plugins = docs_workspace
    example, config = page_config("attribution.md", base)
    done = run_command(example, config, plugins)
    assert done.returncode == 0, done.stderr[-3000:]
    out = Path(yaml.safe_load(config.read_text())["evaluation"]["output_dir"])
    for line in read_records(out / "predictions" / "TextGen.jsonl"):
        longest = [a for a in line["attributions"] if a["architecture"] == "longest"]
        assert len(longest) == 1 and longest[0]["passage"], line["attributions"]
    assert "the longest passage of the answer's context" in (out / "results.md").read_text()
