"""The retriever registry: retrieval-eval ranks with the answering retrievers (a plug-in's too) and gets their
hits, a variant ``<variant>@<retriever>`` answers with any of them (a plug-in's too), and its answers are
fingerprinted by what retrieved them."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path

import pytest
import torch

from graphctx.errors import ConfigError
from graphctx.evaluation.matrix.resume_guard import ResumeGuard
from graphctx.evaluation.retrieval_eval.judge import Pool, Queries, evaluate_retrieval, registry_rankings
from graphctx.evaluation.retrieval_eval.report import write_report
from graphctx.pipeline.config_file import load_config
from graphctx.prompts import get_variants, retriever_twin
from graphctx.retrieval.index import build_index
from graphctx.retrieval.registry import BUILT_IN, PoolView, retriever_entries
from graphctx.retrieval.settings import RetrievalSettings

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"
POOL = [
    "How do I stake ADA with Daedalus?",
    "Daedalus wallet does not sync",
    "What is a stake pool margin?",
    "How to register a stake pool certificate",
    "Yoroi shows a wrong balance",
    "Minting an NFT with cardano-cli",
    "cardano-cli transaction build fails with a fee error",
    "What is the minimum UTXO value?",
]
QUERIES = ["stake pool margin and fees", "cardano-cli fee error when building", "wallet balance is wrong"]


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> tuple[list[int], RetrievalSettings, str]:
    settings = RetrievalSettings(device="cpu", threshold=0.3, top_k=3)
    return [10 + i for i in range(len(POOL))], settings, str(tmp_path_factory.mktemp("cache"))


def write_plugin(folder: Path) -> Path:
    """``folder`` holding ``myretrievers.LastFirst``: the last ``count`` pool questions for any query."""
    (folder / "myretrievers.py").write_text(
        "from graphctx.retrieval.registry import PluginRetriever\n"
        "from graphctx.retrieval.retriever import Hit\n\n"
        "class LastFirst(PluginRetriever):\n"
        "    name = 'last_first'\n\n"
        "    def __init__(self, settings, count: int = 2):\n"
        "        super().__init__(settings)\n"
        "        self.count = count\n\n"
        "    def build(self, pool):\n"
        "        class Ranker:\n"
        "            def retrieve(_, queries):\n"
        "                return [[Hit(i, 1.0) for i in pool.ids[::-1][: self.count]] for _ in queries]\n"
        "        return Ranker()\n"
    )
    return folder


def view(ids, settings, cache) -> PoolView:
    def index(method: str):
        return build_index(ids, POOL, dataclasses.replace(settings, method=method), cache)

    return PoolView(ids, POOL, index)


def judged(ids, settings, cache) -> tuple[Pool, Queries]:
    """The pool and QUERIES as retrieval-eval holds them: embedded once, by the answering encoder."""
    graph = retriever_entries(settings)["graph"].build(view(ids, settings, cache))
    relevance = [{12: 2}, {16: 2, 15: 1}, {14: 1}]
    return Pool(ids, POOL, graph.index.embeddings), Queries(
        [0, 1, 2], QUERIES, graph.embed(QUERIES), relevance
    )


def test_retrieval_eval_ranks_with_the_answering_retrievers_hits(pool):
    ids, settings, cache = pool
    entries = retriever_entries(settings)
    assert list(entries) == [cls.name for cls in BUILT_IN]
    rankings = registry_rankings(*judged(ids, settings, cache), settings, settings.top_k)
    assert list(rankings) == list(entries)
    for name, entry in entries.items():  # the answering path embeds the queries itself
        hits = entry.build(view(ids, settings, cache)).retrieve(QUERIES)
        assert rankings[name][0] == [[hit.id for hit in row] for row in hits], name
    bm25 = entries["bm25"].build(view(ids, settings, cache)).retrieve(QUERIES)
    assert bm25[1][0].id == 16  # "cardano-cli ... fee error" shares the rare terms
    assert all(hit.score > 0 for row in bm25 for hit in row)


def test_a_plugin_retriever_is_judged_by_retrieval_eval(tmp_path, monkeypatch, pool):
    ids, settings, cache = pool
    monkeypatch.syspath_prepend(str(write_plugin(tmp_path)))
    extra = [{"class_path": "myretrievers.LastFirst", "init_args": {"count": 2}}]
    with_plugin = dataclasses.replace(settings, extra=extra)
    evaluation = evaluate_retrieval(*judged(ids, settings, cache), with_plugin, [0.5], [1, 3], n_resamples=20)
    last_first = evaluation.methods[-1]
    assert last_first.method == "last_first" and last_first.threshold is None
    assert last_first.ranking == [[17, 16]] * 3 and last_first.metrics["recall@3"].mean == pytest.approx(
        0.5 / 3
    )
    assert set(last_first.versus_graph) == set(evaluation.metric_names)
    document = write_report(evaluation, {"split": "test"}, tmp_path / "report")
    assert "last_first" in document["methods"]
    run = (tmp_path / "report" / "trec" / "run.last_first.txt").read_text().splitlines()
    assert run[0].split()[:4] == ["0", "Q0", "17", "1"] and run[-1].endswith("graphctx.last_first")
    markdown = (tmp_path / "report" / "results.md").read_text()
    assert "| last_first |  |" in markdown and "| last_first − graph |" in markdown


def test_a_retriever_variant_is_its_variants_prompt_with_other_pairs():
    variant, hybrid, bm25 = get_variants(["TextGen", "GraphGen@hybrid", "TextGen@bm25"])  # as given
    assert (bm25.name, bm25.label, bm25.retrieval) == ("TextGen@bm25", "TextGen (bm25)", "bm25")
    assert (bm25.model, bm25.pairs, bm25.knowledge) == (variant.model, variant.pairs, variant.knowledge)
    assert (
        hybrid.retrieval == "hybrid"
        and retriever_twin(hybrid) == "GraphGen"
        and retriever_twin(variant) is None
    )
    with pytest.raises(ValueError, match="needs a variant with retrieval"):
        get_variants(["FineTuned@bm25"])


def test_an_unknown_retriever_in_a_variant_is_one_line_naming_the_setting():
    with pytest.raises(ConfigError) as error:
        load_config(TINY, ["--evaluation.variants", "[TextGen@bm52]"])
    assert "\n" not in str(error.value)
    assert (
        "evaluation.variants: unknown retriever 'bm52'; choose from ['bm25', 'dense', 'graph', 'hybrid']"
        in str(error.value)
    )


def test_a_plugin_retriever_answers_and_is_in_its_answers_fingerprint(tmp_path, monkeypatch, pool):
    ids, settings, cache = pool
    monkeypatch.syspath_prepend(str(write_plugin(tmp_path)))
    extra = '[{"class_path": "myretrievers.LastFirst", "init_args": {"count": 2}}]'
    config = load_config(
        TINY, ["--retrieval.extra", extra, "--evaluation.variants", "[Base-TextGen, Base-TextGen@last_first]"]
    )
    entry = config.retriever_entries["last_first"]
    hits = entry.build(view(ids, settings, cache)).retrieve(["anything"])
    assert [hit.id for hit in hits[0]] == [ids[-1], ids[-2]]
    text, plugin = get_variants(config.evaluation.variants)
    guard = ResumeGuard(config, None, None)
    parts = guard.prediction_fingerprint(plugin)
    assert parts["retriever"]["class_path"] == "myretrievers.LastFirst" and parts["retriever"][
        "init_args"
    ] == {"count": 2}
    assert "retriever" not in guard.prediction_fingerprint(
        text
    )  # built-ins: the retrieval settings say it all
    assert "extra" not in parts["retrieval"]
    from graphctx.stack.model_stack import ModelStack

    listed = {item["key"]: item["what"] for item in ModelStack(config).extensions()}
    assert listed["retrieval.last_first"] == "myretrievers.LastFirst (a plug-in, beyond the paper)"


def test_the_pool_retriever_of_graphctx_retrieve_takes_any_registered_method(pool):
    from graphctx.pipeline.pool import pool_retriever

    ids, settings, cache = pool
    rows = [{"id": i, "question": text} for i, text in zip(ids, POOL, strict=True)]
    hits = pool_retriever(rows, dataclasses.replace(settings, method="bm25"), cache).retrieve(QUERIES[:1])
    assert hits[0][0].id == 12 and torch.tensor([hit.score for hit in hits[0]]).diff().le(0).all()


def test_a_setting_of_a_mode_that_is_off_never_re_answers():
    from graphctx.prompts import VARIANTS

    def fingerprint(*overrides: str) -> str:
        return ResumeGuard(load_config(TINY, list(overrides)), None, None).fingerprint(
            VARIANTS["Base-GraphGen"]
        )

    power = fingerprint()
    assert fingerprint("--retrieval.scale.ppr_eps", "0.001") == power  # read by push only
    assert fingerprint("--retrieval.scale.knn_nprobe", "32") == power  # read by the k-NN build only
    assert fingerprint("--retrieval.scale.knn_recall_sample", "10") == power  # measures recall only
    push = fingerprint("--retrieval.scale.ppr", "push")
    eps = fingerprint("--retrieval.scale.ppr", "push", "--retrieval.scale.ppr_eps", "0.001")
    assert push != power and eps != push


def write_broken(folder: Path, retrieve: str, init: str = "pass", build: str = "Ranker()") -> Path:
    """``folder`` holding ``broken.Broken``, whose retriever's ``retrieve`` returns ``retrieve`` (an
    earlier test's ``broken`` module forgotten)."""
    sys.modules.pop("broken", None)
    importlib.invalidate_caches()
    (folder / "broken.py").write_text(
        "import math\n"
        "from graphctx.retrieval.registry import PluginRetriever\n"
        "from graphctx.retrieval.retriever import Hit\n\n"
        "class Broken(PluginRetriever):\n"
        "    name = 'broken'\n\n"
        "    def __init__(self, settings):\n"
        "        super().__init__(settings)\n"
        f"        {init}\n\n"
        "    def build(self, pool):\n"
        "        first = pool.ids[0]\n"
        "        class Ranker:\n"
        "            def retrieve(_, queries):\n"
        f"                return {retrieve}\n"
        f"        return {build}\n"
    )
    return folder


@pytest.mark.parametrize(
    ("retrieve", "problem"),
    [
        ("[[Hit(first, 1.0)] for _ in range(len(queries) + 1)]", "retrieve() gave 3 hit lists for 2 queries"),
        ("[[Hit(first, 1.0)]]", "retrieve() gave 1 hit lists for 2 queries"),
        (
            "[[Hit(first, math.inf)] for _ in queries]",
            "retrieve()'s hit list 0: score inf of id 10 is not a finite number",
        ),
        (
            "[[Hit(first, math.nan)] for _ in queries]",
            "retrieve()'s hit list 0: score nan of id 10 is not a finite number",
        ),
        ("[[Hit(-1, 1.0)] for _ in queries]", "retrieve()'s hit list 0: id -1 is not in the pool"),
        (
            "[[(first, 1.0)] for _ in queries]",
            "retrieve()'s hit list 0: (10, 1.0) is not a graphctx.retrieval.retriever.Hit",
        ),
        ("[Hit(first, 1.0) for _ in queries]", "retrieve()'s hit list 0: not a list"),
        ("{}['nothing']", "raised KeyError: 'nothing'"),
    ],
)
def test_a_plugin_retrievers_wrong_hits_are_one_line_naming_it(
    tmp_path, monkeypatch, pool, retrieve, problem
):
    ids, settings, cache = pool
    monkeypatch.syspath_prepend(str(write_broken(tmp_path, retrieve)))
    config = load_config(TINY, ["--retrieval.extra", '[{"class_path": "broken.Broken"}]'])
    retriever = config.retriever_entries["broken"].build(view(ids, settings, cache))
    with pytest.raises(ConfigError) as error:
        retriever.retrieve(["a query", "another"])
    assert str(error.value) == f"retrieval.extra broken (broken.Broken): {problem}"


@pytest.mark.parametrize(
    ("init", "build", "problem"),
    [
        (
            "1 / 0",
            "Ranker()",
            "retrieval.extra[0]: broken.Broken(...) raised ZeroDivisionError: division by zero",
        ),
        (
            "pass",
            "None",
            "retrieval.extra broken (broken.Broken): build() returned NoneType, not a retriever",
        ),
        (
            "pass",
            "nothing",
            "retrieval.extra broken (broken.Broken): raised NameError: name 'nothing' is not",
        ),
    ],
)
def test_a_plugin_retriever_that_fails_to_build_is_one_line_naming_it(
    tmp_path, monkeypatch, pool, init, build, problem
):
    ids, settings, cache = pool
    monkeypatch.syspath_prepend(str(write_broken(tmp_path, "[]", init, build)))
    with pytest.raises(ConfigError) as error:
        config = load_config(TINY, ["--retrieval.extra", '[{"class_path": "broken.Broken"}]'])
        config.retriever_entries["broken"].build(view(ids, settings, cache))
    assert "\n" not in str(error.value) and problem in str(error.value), str(error.value)


def test_a_plugin_module_that_fails_on_import_is_one_line_naming_it(tmp_path, monkeypatch):
    (tmp_path / "failing.py").write_text("undefined_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as error:
        load_config(TINY, ["--retrieval.extra", '[{"class_path": "failing.Retriever"}]'])
    assert str(error.value).endswith(
        "retrieval.extra[0]: importing 'failing' raised NameError: name 'undefined_name' is not defined"
    )
