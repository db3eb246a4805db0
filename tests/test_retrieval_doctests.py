"""The ``Examples:`` sections of graphctx/retrieval run as written and print what they show (doctest)."""

from __future__ import annotations

import doctest
import importlib

import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# Examples on tiny tensors; the others load the packaged MiniLM (a second or two each).
TENSOR_ONLY = [
    *("settings", "numerics", "ranking", "dense", "components", "layout", "pagerank", "graph"),
    *("scale.settings", "scale.builders", "scale.knn"),
]
WITH_MODEL = ["encoder", "embeddings", "builders", "index", "retriever"]


@pytest.mark.parametrize(
    "name", [*TENSOR_ONLY, *(pytest.param(name, marks=pytest.mark.slow) for name in WITH_MODEL)]
)
def test_examples_run_as_written(name: str) -> None:
    module = importlib.import_module(f"graphctx.retrieval.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"graphctx.retrieval.{name} has no example"
    assert result.failed == 0, f"{result.failed} example(s) of graphctx.retrieval.{name} failed (see above)"
