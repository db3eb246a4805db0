"""graphctx's imports point down its layers and form no cycle (deferred and type-only imports included)."""

from __future__ import annotations

import ast
import importlib.metadata
import sys
import tomllib
from pathlib import Path

import networkx as nx
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PACKAGE = Path(__file__).resolve().parents[1] / "graphctx"
LAYERS = {
    **dict.fromkeys(
        (
            "errors",
            "cache",
            "folder_lock",
            "quiet",
            "paper",
            "paper_figures",
            "checks",
            "settings_docs",
            "plugins",
            "citations",
            "paths",
            "decoding",
            "prefill",
            "progress",
        ),
        0,
    ),
    "data": 1,
    # the stages: retrieval, knowledge (may use retrieval), the model side (may use both)
    "retrieval": 2,
    "knowledge": 3,
    **dict.fromkeys(("model", "prompts", "generation", "model_use"), 4),
    **dict.fromkeys(("metrics", "baselines", "evaluation_settings"), 5),
    "pipeline": 6,  # the run config, the pool, contexts and the Answerer: the answering recipe
    "stack": 7,  # the model stack of a config and its report (graphctx plan), the memory plan
    "serve": 8,  # graphctx serve: the answer API, the live pool, the page
    "evaluation": 8,  # evaluates only: orchestration, resume guard, shards, scoring, tables, the callback
    **dict.fromkeys(
        ("commands", "cli", "command_line", "reproduce"), 9
    ),  # entry points, with train.py and evaluate.py
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> nx.DiGraph:
    """Every graphctx module and the graphctx modules it imports, anywhere in its code."""
    graph = nx.DiGraph()
    for path in PACKAGE.rglob("*.py"):
        source = module_name(path)
        graph.add_node(source)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("graphctx"):
                graph.add_edge(source, node.module)
            elif isinstance(node, ast.Import):
                graph.add_edges_from((source, a.name) for a in node.names if a.name.startswith("graphctx"))
    return graph


def layer(module: str) -> int:
    return LAYERS[module.split(".")[1]]


def test_every_module_has_a_layer():
    assert all(module == "graphctx" or module.split(".")[1] in LAYERS for module in imports())


def test_imports_point_down_the_layers():
    upward = [(a, b) for a, b in imports().edges if a != "graphctx" and layer(b) > layer(a)]
    assert not upward, upward


SCALE = "graphctx.retrieval.scale"
SCALE_ENTRIES = {
    "graphctx.retrieval.builders": {f"{SCALE}.builders"},  # the branch point: a scale mode that is on
    "graphctx.retrieval.settings": {f"{SCALE}.settings"},  # the retrieval.scale section's class
}
"""The only imports from the paper's path (``graphctx.retrieval`` outside ``scale``) into the scale modes."""


def test_the_paper_path_enters_the_scale_modes_at_one_branch_point():
    """Inside retrieval, imports point from the scale modes to the paper's path (embed, threshold graph,
    power iteration), which reaches them only through :data:`SCALE_ENTRIES`: a reader of the paper's path
    meets one branch, and the scale modes can change without touching it."""
    paper = [
        (a, b)
        for a, b in imports().edges
        if a.startswith("graphctx.retrieval") and not a.startswith(SCALE) and b.startswith(SCALE)
    ]
    assert not [(a, b) for a, b in paper if b not in SCALE_ENTRIES.get(a, set())], paper


def test_no_import_cycle():
    cycles = [sorted(c) for c in nx.strongly_connected_components(imports()) if len(c) > 1]
    assert not cycles, cycles


NOT_INSTALLED = {"faiss": ["faiss-cpu"]}
"""Distributions of optional imports the test environment lacks, where the name differs from the import's."""


def third_party_imports() -> dict[str, set[str]]:
    """Per top-level package outside graphctx and the standard library, the graphctx modules importing it
    (anywhere in their code: deferred imports count, as a user's run reaches them)."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "graphctx" and top not in sys.stdlib_module_names:
                    found.setdefault(top, set()).add(module_name(path))
    return found


def test_every_imported_package_is_a_declared_runtime_dependency():
    """What graphctx imports is in pyproject's dependencies or a runtime extra, never only in ``dev``: a
    user's install has no dev extra (sentence-transformers, for one, is only the encoder's test reference)."""
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    runtime = [*project["dependencies"], *(r for name, reqs in extras.items() if name != "dev" for r in reqs)]
    declared = {canonicalize_name(Requirement(r).name) for r in runtime}
    installed = importlib.metadata.packages_distributions()

    def distributions(package: str) -> set[str]:
        names = installed.get(package, NOT_INSTALLED.get(package, [package]))
        return {canonicalize_name(name) for name in names}

    undeclared = {
        package: sorted(modules)
        for package, modules in third_party_imports().items()
        if not declared & distributions(package)
    }
    assert not undeclared, undeclared
