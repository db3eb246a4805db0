"""graphctx retrieval-eval: the metric math by hand, the link reading on a written dump (folder and .7z),
BM25 and the fusion, bad input (one line, nothing written) and a run on the tiny config."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml
from test_bad_input import good_pair, row, settings_for
from test_data_archive import make_7z
from test_retrieval_trec import assert_ir_measures_agree

from graphctx.cli import main
from graphctx.data import DatasetSettings, load_qa_dataset
from graphctx.data.links import read_dump_links
from graphctx.errors import ConfigError, DataError
from graphctx.evaluation.retrieval_eval.measures import (
    ndcg_at_k,
    per_query_scores,
    recall_at_k,
    reciprocal_rank,
)
from graphctx.evaluation.retrieval_eval.queries import check_link_source, load_link_queries, masked_pool_texts
from graphctx.retrieval.fusion import reciprocal_rank_fusion
from graphctx.retrieval.lexical import BM25Index
from graphctx.retrieval.registry import BUILT_IN

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "tiny.yaml"


# ---- metrics ---------------------------------------------------------------------------------------------
def test_recall_reciprocal_rank_and_graded_ndcg_by_hand():
    relevant = {7: 2, 3: 1}  # a duplicate and a linked question
    ranking = [5, 3, 9, 7]
    assert recall_at_k(ranking, relevant, 1) == 0.0
    assert recall_at_k(ranking, relevant, 2) == 0.5
    assert recall_at_k(ranking, relevant, 4) == 1.0
    assert reciprocal_rank(ranking, relevant, 10) == 0.5
    assert reciprocal_rank(ranking, relevant, 1) == 0.0
    # DCG = (2^1-1)/log2(3) + (2^2-1)/log2(5); IDCG = 3/log2(2) + 1/log2(3)
    dcg = 1 / math.log2(3) + 3 / math.log2(5)
    assert ndcg_at_k(ranking, relevant, 10) == pytest.approx(dcg / (3 + 1 / math.log2(3)))
    assert ndcg_at_k([7, 3], relevant, 10) == pytest.approx(1.0)
    assert ndcg_at_k([3, 7], relevant, 10) < 1.0  # the duplicate belongs first
    assert ndcg_at_k(ranking, relevant, 3) == pytest.approx((1 / math.log2(3)) / (3 + 1 / math.log2(3)))


def test_per_query_scores_skip_empty_slots():
    scores = per_query_scores([[-1, 4, -1], [8, 9]], [{4: 1}, {1: 2}], recall_ks=[1, 2], depth=10)
    assert scores["recall@1"].tolist() == [1.0, 0.0]  # the -1 slot does not take rank 1
    assert scores["mrr@10"].tolist() == [1.0, 0.0]
    assert scores["ndcg@10"].tolist() == [1.0, 0.0]


def test_reciprocal_rank_fusion_by_hand():
    first = torch.tensor([[10, 20, -1], [5, -1, -1]])
    second = torch.tensor([[20, 30, 10], [-1, -1, -1]])
    scores, nodes = reciprocal_rank_fusion([first, second], k=4, c=60)
    assert nodes.tolist() == [[20, 10, 30, -1], [5, -1, -1, -1]]
    assert scores[0, 0].item() == pytest.approx(1 / 62 + 1 / 61)
    assert scores[0, 1].item() == pytest.approx(1 / 61 + 1 / 63)


def test_bm25_ranks_shared_rare_terms_first_and_leaves_unmatched_out():
    index = BM25Index(["cardano node restart", "stake pool delegation", "node sync stuck", "ledger wallet"])
    scores, nodes = index.search(["my node sync is stuck", "zzz qqq"], k=4)
    assert nodes[0, :2].tolist() == [2, 0] and nodes[0, 2:].tolist() == [-1, -1]
    assert scores[0, 0] > scores[0, 1] > 0
    assert nodes[1].tolist() == [-1, -1, -1, -1]


# ---- links of a written dump -----------------------------------------------------------------------------
URL = "https://site.com/questions/40/how-do-i-delegate"
LINK = f"&lt;a href=&quot;{URL}&quot;&gt;How do I delegate ada to a pool?&lt;/a&gt;"
POSTS = (
    good_pair(10, "2021-01-10", "How do I restart nginx on Ubuntu?")
    + good_pair(40, "2021-02-10", "How do I delegate ada to a pool?")
    + good_pair(50, "2021-03-10", "Why is my wallet not syncing?")
    + good_pair(20, "2021-06-10", "Why does apt hang on a lock file?")
    + good_pair(30, "2021-07-10", "Where are systemd unit files kept?")
    + good_pair(70, "2021-07-12", "Delegating my coins", f"&lt;p&gt;Like {LINK}, but for my coins.&lt;/p&gt;")
    + row(80, 1, CreationDate="2021-07-14T00:00:00", Title="Nginx restart loops", Body="&lt;p&gt;x&lt;/p&gt;")
    + row(90, 1, CreationDate="2021-07-16T00:00:00", Title="Unit files again", Body="&lt;p&gt;y&lt;/p&gt;")
)
LINKS = [  # (PostId, RelatedPostId, LinkTypeId)
    (70, 40, 3),  # 70 closed as a duplicate of 40: the dataset drops 70
    (70, 40, 1),  # ... and linked too: the larger grade stays
    (70, 50, 1),
    (10, 80, 1),  # the pool question links the newer one (80 has no accepted answer: dropped)
    (30, 10, 1),  # a kept test question
    (90, 30, 1),  # two test questions: no pool question
    (20, 50, 1),  # validation, outside the test window
]


def write_site(folder: Path, links: list[tuple[int, int, int]] | None = LINKS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Posts.xml").write_text(f'<?xml version="1.0" encoding="utf-8"?>\n<posts>\n{POSTS}</posts>\n')
    if links is not None:
        rows = "".join(
            f'  <row Id="{i}" PostId="{a}" RelatedPostId="{b}" LinkTypeId="{t}" />\n'
            for i, (a, b, t) in enumerate(links, 1)
        )
        (folder / "PostLinks.xml").write_text(f"<?xml version='1.0'?>\n<postlinks>\n{rows}</postlinks>\n")
    return folder


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return write_site(tmp_path / "site")


def test_links_are_graded_both_ways_and_kept_for_questions_the_filters_drop(site, cache_dir):
    settings = settings_for(site)
    settings.workers = 1
    dataset = load_qa_dataset(settings, cache_dir)
    assert 70 not in dataset["test"]["id"] and 80 not in dataset["test"]["id"]  # filtered out
    queries, links = load_link_queries(settings, dataset, "test")
    assert links.rows == len(LINKS)
    got = {q.id: (q.relevant, q.in_split) for q in queries}
    assert got == {30: ({10: 1}, True), 70: ({40: 2, 50: 1}, False), 80: ({10: 1}, False)}
    by_id = {q.id: q.text for q in queries}
    assert by_id[30] == dataset["test"]["question"][dataset["test"]["id"].index(30)]  # the dataset's cleaning
    assert by_id[80] == "Nginx restart loops\n\nx"
    assert (
        "delegate" not in by_id[70].lower() and by_id[70] == "Delegating my coins\n\nLike , but for my coins."
    )
    unmasked = {q.id: q.text for q in load_link_queries(settings, dataset, "test", mask=False)[0]}
    assert "How do I delegate ada to a pool?" in unmasked[70]


def test_a_pool_questions_link_to_a_query_is_masked_like_the_querys(tmp_path, cache_dir):
    # pool question 10 was edited to cite the newer test question 80 by its title
    cited = "&lt;a href=&quot;https://site.com/questions/80/nginx&quot;&gt;Nginx restart loops&lt;/a&gt;"
    body = f"&lt;p&gt;It hangs. See also {cited}.&lt;/p&gt;"
    posts = POSTS.replace(good_pair(10, "2021-01-10", "How do I restart nginx on Ubuntu?"), "")
    posts = good_pair(10, "2021-01-10", "How do I restart nginx on Ubuntu?", body) + posts
    folder = write_site(tmp_path / "site")
    (folder / "Posts.xml").write_text(f'<?xml version="1.0" encoding="utf-8"?>\n<posts>\n{posts}</posts>\n')
    settings = settings_for(folder)
    settings.workers = 1
    dataset = load_qa_dataset(settings, cache_dir)
    queries, links = load_link_queries(settings, dataset, "test")
    train = dataset["train"]
    ids, texts = list(train["id"]), list(train["question"])
    assert "Nginx restart loops" in texts[ids.index(10)]  # the pool text retrieval would embed
    masked, changed = masked_pool_texts(ids, texts, links, [q.id for q in queries])
    assert changed == 1 and "Nginx restart loops" not in masked[ids.index(10)]
    assert masked[ids.index(10)] == "How do I restart nginx on Ubuntu?\n\nIt hangs. See also ."
    assert [t for i, t in enumerate(texts) if ids[i] != 10] == [
        t for i, t in enumerate(masked) if ids[i] != 10
    ]


@pytest.mark.parametrize("order", [("PostLinks.xml", "Posts.xml"), ("Posts.xml", "PostLinks.xml")])
def test_a_7z_archive_reads_the_same_links_in_either_member_order(site, tmp_path, order):
    archive = make_7z(tmp_path / "site.7z", {f"site/{name}": site / name for name in order})
    folder, packed = read_dump_links(site), read_dump_links(archive)
    assert packed.grades == folder.grades and packed.questions == folder.questions
    assert folder.grades[70] == {40: 2, 50: 1} and folder.grades[40] == {70: 2}


# ---- bad input -------------------------------------------------------------------------------------------
def small_config(tmp_path: Path, source: Path) -> Path:
    config = yaml.safe_load(TINY.read_text())
    config["cache_dir"] = str(tmp_path / "cache")
    split = {key: value for key, value in vars(settings_for(source).split).items()}
    config["data"]["dataset"].update(source=str(source), workers=1, filters={"max_tokens": None}, split=split)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def one_error_line(tmp_path: Path, source: Path, capsys) -> str:
    out = tmp_path / "report"
    status = main(
        [
            "retrieval-eval",
            "--config",
            str(small_config(tmp_path, source)),
            "--evaluation.retrieval_eval_dir",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert status == 1 and captured.out == "" and not out.exists(), captured.err[-2000:]
    assert lines[-1].startswith("error: ") and not any(line.startswith("Traceback") for line in lines)
    return lines[-1]


def test_a_dump_without_post_links_is_one_line(tmp_path, capsys):
    site = write_site(tmp_path / "nolinks", links=None)
    assert f"{site}: no PostLinks.xml" in one_error_line(tmp_path, site, capsys)


def test_links_that_reach_no_pool_question_are_one_line(tmp_path, capsys):
    site = write_site(tmp_path / "apart", links=[(90, 30, 1), (80, 70, 3)])
    line = one_error_line(tmp_path, site, capsys)
    assert "PostLinks.xml: none of its 2 links" in line and "nothing to evaluate" in line


def test_a_tabular_source_has_no_links(tmp_path, capsys):
    table = tmp_path / "pairs.jsonl"
    table.write_text(json.dumps({"id": 1, "title": "t?", "answer": "a" * 50, "created": "2021-01-02"}) + "\n")
    assert "a tabular or Hugging Face source has no PostLinks.xml" in one_error_line(tmp_path, table, capsys)


def test_one_linked_query_prints_its_metrics_with_p_one_where_methods_differ(tmp_path, capsys):
    # one query: 70 (closed as a duplicate of 40, so the filters drop it), which graph and BM25 rank apart
    site = write_site(tmp_path / "one", links=[(70, 40, 3)])
    out = tmp_path / "report"
    argv = ["retrieval-eval", "--config", str(small_config(tmp_path, site)), "--json", "--thresholds", "0.5"]
    assert main([*argv, "--evaluation.retrieval_eval_dir", str(out)]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert "warning: only 1 test question(s)" in captured.err and "Traceback" not in captured.err
    assert document["queries"] == 1 and json.loads((out / "results.json").read_text()) == document
    metrics = ("recall@2", "recall@10", "mrr@10", "ndcg@10")
    versus = [
        document["methods"][m][name]["minus_graph"] for m in ("dense", "bm25", "hybrid") for name in metrics
    ]
    assert any(v["mean"] != 0 for v in versus)  # a difference over one query: the case scipy refuses
    # one paired difference d: its two sign flips, +d and -d, are equally extreme, so p = 1
    assert all(v["p"] == 1.0 and v["low"] == v["mean"] == v["high"] for v in versus)


def test_train_is_not_an_evaluated_split_and_thresholds_are_checked(site, tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"evaluation\.split='train'"):
        check_link_source(settings_for(site), "train")
    with pytest.raises(DataError, match="hf:x/y"):
        check_link_source(DatasetSettings(source="hf:x/y"), "test")
    config = small_config(tmp_path, site)
    for bad in ("0.5,1.2", "0.9:0.5:-0.1", "a,b"):
        assert main(["retrieval-eval", "--config", str(config), "--thresholds", bad]) == 1
        assert "error: --thresholds" in capsys.readouterr().err
    named = {  # one line saying what is wrong, never a traceback or a sweep of millions
        "0.9:0.5:0.1": "the range is reversed (stop 0.5 is below start 0.9)",
        "0.5:inf:0.1": "start, stop and step must be finite numbers",
        "0.5:0.9:0.0000001": "4000001 values; a sweep runs at most 200: take a larger step",
    }
    for bad, reason in named.items():
        assert main(["retrieval-eval", "--config", str(config), "--thresholds", bad]) == 1
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(f"error: --thresholds {bad!r}: {reason}")


def test_the_split_is_the_config_key_and_the_old_spellings_are_one_line(site, tmp_path, capsys):
    config, out = str(small_config(tmp_path, site)), tmp_path / "report"
    argv = ["retrieval-eval", "--config", config, "--evaluation.retrieval_eval_dir", str(out)]
    assert main([*argv, "--evaluation.split", "train"]) == 1  # the key reaches the command's own check
    assert "evaluation.split='train'" in capsys.readouterr().err
    old = {"--split": "--evaluation.split", "--output-dir": "--evaluation.retrieval_eval_dir"}
    for name, key in old.items():
        assert main(["retrieval-eval", "--config", config, f"{name}={out}"]) == 2
        assert capsys.readouterr().err.splitlines() == [f"graphctx retrieval-eval: {name} is now {key}"]
    assert not out.exists()


def test_help_piped_into_a_reader_that_stops_early_ends_quietly():
    import subprocess

    command = "graphctx data --help | head -1"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("usage: graphctx data") and done.stderr == ""


# ---- the tiny config -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_tiny_config_end_to_end(tmp_path, capsys):
    out = tmp_path / "report"
    argv = [
        "retrieval-eval",
        "--config",
        str(TINY),
        "--json",
        "--thresholds",
        "0.5,0.7",
        "--evaluation.retrieval_eval_dir",
        str(out),
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert "warning: only" in captured.err  # cardano's sample has a handful of linked test questions
    names = ["results.csv", "results.json", "results.md", "sweep.png", "trec"]
    assert sorted(p.name for p in out.iterdir()) == names
    assert_ir_measures_agree(out, [2, 10])  # ir-measures scores the TREC files as graphctx does
    assert json.loads((out / "results.json").read_text()) == document
    assert document["queries"] >= 2 and document["pool"] == 293 and document["top_k"] == 2
    assert set(document["methods"]) == {cls.name for cls in BUILT_IN}
    for result in [*document["methods"].values(), *document["sweep"]]:
        for name in ("recall@2", "recall@10", "mrr@10", "ndcg@10"):
            interval = result[name]
            assert 0 <= interval["low"] <= interval["mean"] <= interval["high"] <= 1, (name, interval)
        assert result["recall@2"]["mean"] <= result["recall@10"]["mean"]
    low, high = document["sweep"]
    assert (low["threshold"], high["threshold"]) == (0.5, 0.7)
    assert low["edges"] > high["edges"] and low["linked_share"] >= high["linked_share"]
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| graph | 0.50 |" in (out / "results.md").read_text()
    assert document["ndcg_gain"].startswith("exponential, 2^grade - 1 (duplicate 3, linked 1)")
    assert "| ndcg@10 (exp. gain) |" in (out / "results.md").read_text()
    assert f"nDCG gain {document['ndcg_gain']}." in (out / "results.md").read_text()
    assert len((out / "results.csv").read_text().splitlines()) == 1 + 4 + 2
    # each method against graph on the same queries: a paired difference, its interval and p
    assert "minus_graph" not in document["methods"]["graph"]["ndcg@10"]
    for method in ("dense", "bm25", "hybrid"):
        versus = document["methods"][method]["ndcg@10"]["minus_graph"]
        assert versus["low"] <= versus["mean"] <= versus["high"] and 0 <= versus["p"] <= 1
        own, graph = document["methods"][method]["ndcg@10"]["mean"], document["methods"]["graph"]["ndcg@10"]
        assert versus["mean"] == pytest.approx(own - graph["mean"])
    assert "| dense − graph |" in (out / "results.md").read_text()
    assert document["masked_pool_questions"] >= 0
