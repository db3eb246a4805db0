"""The baselines' algorithms on small inputs with known outputs, and their variants end to end."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_config import TINY

from graphctx.baselines import ANSWER_MAKERS, Candidate, answerbot, candidates_for, techsumbot
from graphctx.baselines.text import mmr, paragraphs, sentences
from graphctx.data.build import EmptySplitError
from graphctx.errors import ConfigError
from graphctx.knowledge.budget import QAPair
from graphctx.prompts import BASELINE_VARIANTS, VARIANTS, get_variants


def test_baselines_are_chosen_by_name_and_never_in_the_default_set():
    assert get_variants(None) == list(VARIANTS.values())
    chosen = get_variants(["AnswerBot", "GraphGen", "RetrievedAnswer-Graph"])
    assert [v.name for v in chosen] == ["GraphGen", "RetrievedAnswer-Graph", "AnswerBot"]
    assert set(ANSWER_MAKERS) | {"AnswerBot", "GenQA"} == set(BASELINE_VARIANTS)
    assert BASELINE_VARIANTS["RetrievedAnswer-Graph"].retrieval == "graph"
    assert all(v.model == "none" for v in BASELINE_VARIANTS.values())


def test_evaluate_py_accepts_the_baselines_by_name():
    import evaluate

    args = evaluate.build_parser().parse_args(["--config", str(TINY), "--variants", "AnswerBot", "GenQA"])
    assert args.variants == ["AnswerBot", "GenQA"]


def test_candidates_carry_votes_and_tags_and_no_pool_is_one_error():
    pool = {7: {"answer_score": 12, "tags": ["nginx", "ssl"]}}
    (candidate,) = candidates_for("AnswerBot", [QAPair("q?", "a.", 7)], pool)
    assert candidate == Candidate("q?", "a.", 12, ("nginx", "ssl"))
    with pytest.raises(ConfigError, match=r"^AnswerBot: no retrieved answers .*retrieval pool"):
        candidates_for("AnswerBot", [], pool)


def test_retrieved_answer_is_the_top_answer_verbatim():
    top = "  Run `sudo apt update`.\n\nThen reboot.  "
    assert ANSWER_MAKERS["RetrievedAnswer"]("q", [Candidate("q1", top), Candidate("q2", "other")]) == top


def test_paragraphs_keep_a_code_block_whole_and_sentences_skip_it():
    text = "First line. Second one!\n\n```\nls -l\n\nrm x\n```\n\nLast? Yes."
    assert paragraphs(text) == ["First line. Second one!", "```\nls -l\n\nrm x\n```", "Last? Yes."]
    assert sentences(text) == ["First line.", "Second one!", "Last?", "Yes."]


def test_mmr_skips_the_duplicate_of_a_chosen_unit_and_keeps_the_word_limit():
    scores = np.array([1.0, 0.95, 0.5])
    similarity = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    # after 0, unit 1 gains 0.5*0.95 - 0.5*1 < 0 and unit 2 gains 0.25: 2 comes before 1
    assert mmr(scores, similarity, 0.5, [10, 10, 10], 100) == [0, 2, 1]
    assert mmr(scores, similarity, 0.5, [10, 10, 10], 20) == [0, 2]
    assert mmr(scores, similarity, 0.5, [10, 30, 5], 12) == [0]  # 2 would make 15 > 12


def test_answerbot_features_and_score_by_hand():
    question = "How do I restart nginx after changing the ssl config?"
    first = "Some background about web servers.\n\nI would recommend `sudo systemctl restart nginx`."
    candidates = [
        Candidate("q1", first, votes=10, tags=("nginx", "ssl")),
        Candidate("q2", "Restart nginx to load the ssl config.", votes=0, tags=("nginx",)),
    ]
    bot = answerbot.AnswerBot([c.answer for c in candidates])  # the pool: these two answers alone
    texts, score, _ = bot.paragraph_scores(question, candidates)
    assert texts == [
        "Some background about web servers.",
        "I would recommend `sudo systemctl restart nginx`.",
        "Restart nginx to load the ssl config.",
    ]
    # entity overlap: the query names nginx and ssl; paragraph 2 names nginx (1/2), paragraph 3 both (1)
    # semantic and format patterns: paragraph 2 only; position: 1, 1/2, 1; vote: 1, 1, 0.5
    from sklearn.feature_extraction.text import TfidfVectorizer

    tf = TfidfVectorizer(token_pattern=r"(?u)\b\w[\w.+#-]*\w\b|\b\w\b")
    vectors = tf.fit_transform(texts).toarray()
    relevance = vectors @ tf.transform([question]).toarray()[0]
    idf = TfidfVectorizer(binary=True, norm=None, token_pattern=tf.token_pattern).fit_transform(texts)
    idf = idf.sum(axis=1).A.ravel()
    entropy = idf / idf.max()
    expected = relevance * np.array([1, 1.5, 2]) * entropy * np.array([1, 2, 1]) * np.array([1, 2, 1])
    expected *= np.array([1, 0.5, 1]) * np.array([1, 1, 0.5])
    assert score == pytest.approx(expected)
    assert relevance[0] == 0  # no word shared with the query: the background paragraph scores 0
    summary = bot(question, candidates)
    assert summary.split("\n\n")[0] == texts[int(np.argmax(expected))]
    assert "Some background" in summary.split("\n\n")[-1]  # MMR: the zero-score paragraph comes last


def test_answerbot_mmr_drops_a_repeated_paragraph_under_the_word_limit(monkeypatch):
    monkeypatch.setattr(answerbot, "MAX_WORDS", 12)
    repeated = "Restart nginx with systemctl restart nginx now."
    candidates = [Candidate("q1", repeated), Candidate("q2", repeated), Candidate("q3", "Check nginx logs.")]
    bot = answerbot.AnswerBot([c.answer for c in candidates])
    assert bot("restart nginx", candidates) == f"{repeated}\n\nCheck nginx logs."


def test_techsumbot_usefulness_centrality_and_redundancy_by_hand():
    question = "how to mount a usb drive"
    candidates = [
        Candidate("q1", "Use mount to mount the usb drive. The usb drive shows up in lsblk."),
        Candidate("q2", "Use mount to mount the usb drive. Unrelated words here."),
    ]
    texts, score, similarity = techsumbot.sentence_scores(question, candidates)
    assert texts == [
        "Use mount to mount the usb drive.",
        "The usb drive shows up in lsblk.",
        "Use mount to mount the usb drive.",
        "Unrelated words here.",
    ]
    assert score[3] == 0  # shares no word with the query: not useful
    centrality = (similarity.sum(axis=1) - 1) / 3
    assert similarity[0, 2] == pytest.approx(1.0)
    assert centrality[0] > centrality[1] > centrality[3]
    # 0 (best) is taken, 2 repeats it (cosine 1 > 0.5) and goes, then 1; 3 is not useful: never taken
    assert techsumbot.answer(question, candidates) == (
        "Use mount to mount the usb drive. The usb drive shows up in lsblk."
    )
    assert not techsumbot.falls_back(question, candidates)


def test_techsumbot_falls_back_to_the_top_answer_on_code_only_answers_and_says_so():
    code = "```\nsudo mount /dev/sdb1 /mnt\n```"
    candidates = [Candidate("q1", code), Candidate("q2", "Nothing about the query.")]
    assert techsumbot.falls_back("how to mount a usb drive", candidates)
    assert techsumbot.answer("how to mount a usb drive", candidates) == code
    only_code = [Candidate("q1", code), Candidate("q2", "```\nlsblk\n```")]  # no sentence at all
    assert techsumbot.falls_back("how to mount a usb drive", only_code)
    assert techsumbot.answer("how to mount a usb drive", only_code) == code


def test_answerbot_fits_its_idf_on_the_pool_not_on_the_two_candidates():
    question = "How do I restart nginx?"
    candidates = [
        Candidate("q1", "Restart the service with systemctl."),
        Candidate("q2", "Restart nginx by hand."),
    ]
    # the pool talks about nginx all the time: "nginx" carries little IDF there, "systemctl" much
    pool = [c.answer for c in candidates] + [f"nginx config {i} nginx logs" for i in range(30)]
    on_pool = answerbot.AnswerBot(pool)
    on_two = answerbot.AnswerBot([c.answer for c in candidates])
    assert (
        on_pool.idf.idf_[on_pool.idf.vocabulary_["nginx"]] < on_two.idf.idf_[on_two.idf.vocabulary_["nginx"]]
    )
    assert on_pool.idf.vocabulary_.keys() > on_two.idf.vocabulary_.keys()
    _, pooled, _ = on_pool.paragraph_scores(question, candidates)
    _, local, _ = on_two.paragraph_scores(question, candidates)
    assert not np.allclose(pooled / pooled.max(), local / local.max())


def test_techsumbot_keeps_at_most_five_sentences():
    answer = " ".join(f"Step {word} of the disk setup." for word in "abcdefgh")
    assert len(sentences(techsumbot.answer("disk setup step", [Candidate("q", answer)]))) == 5


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, cardano_dir, tiny_bert):
    from evaluation_workspace import write_workspace

    root = tmp_path_factory.mktemp("baselines")
    evaluation = {"output_dir": str(root / "out"), "limit": 3, "bootstrap_samples": 50}
    return root, write_workspace(root, cardano_dir, tiny_bert, "tiny.yaml", evaluation)


@pytest.mark.slow
def test_baseline_variants_answer_without_the_llm_and_are_scored(workspace):
    from graphctx.evaluation.jsonl import read_records
    from graphctx.evaluation.matrix.runner import MatrixEvaluation
    from graphctx.pipeline.config_file import load_config

    root, config_path = workspace
    names = ["RetrievedAnswer", "RetrievedAnswer-Graph", "AnswerBot", "TechSumBot"]
    # the site named askubuntu: results.md sets the baselines beside the paper's Table 3
    evaluation = MatrixEvaluation(load_config(config_path, ["--data.dataset.site", "askubuntu"]), names)
    table = evaluation.evaluate()
    assert [row.variant.name for row in table.rows] == names
    results = (root / "out" / "results.md").read_text()
    assert "## Beside the paper (Table 3, askubuntu)" in results
    answerbot_row = next(line for line in results.splitlines() if line.startswith("| AnswerBot ("))
    assert answerbot_row.startswith(
        "| AnswerBot (not like for like: stand-ins for question retrieval, query relevance) | AnswerBot |"
    )
    assert "paper 0.236" in answerbot_row and "model" not in answerbot_row.split("|")[1]  # no LLM
    assert "- AnswerBot (baseline): in place of the authors' question retrieval: word2vec" in results
    assert "| baseline fallbacks |" in results
    assert "stand-in scorer [tiny-bert@L2]" in answerbot_row  # the workspace's BERTScore encoder
    assert "No published figures for: RetrievedAnswer, RetrievedAnswer (graph)." in results
    for name in names:
        predictions = read_records(root / "out" / "predictions" / f"{name}.jsonl")
        assert len(predictions) == 3 and {p["stop"] for p in predictions} <= {"no_llm", "no_llm_fallback"}
        assert all(p["generated"].strip() and p["new_tokens"] == 0 for p in predictions)
        assert len(read_records(root / "out" / "scores" / f"{name}.jsonl")) == 3
        if name.startswith("RetrievedAnswer"):  # the top hit's accepted answer, verbatim
            assert all(
                p["generated"] == evaluation.pool[p["retrieved_ids"][0]]["answer"] for p in predictions
            )


@pytest.mark.slow
def test_a_baseline_without_a_retrieval_pool_is_one_error_and_writes_no_answer(workspace, tmp_path):
    from graphctx.evaluation.matrix.runner import MatrixEvaluation
    from graphctx.pipeline.config_file import load_config

    _, config_path = workspace
    config = load_config(
        config_path,
        ["--data.dataset.split.train_start", "2015-01-01", "--data.dataset.split.train_end", "2015-02-01"],
    )
    # the data layer refuses the empty pool first (one line naming the split); a context without pairs
    # otherwise meets candidates_for's error (test_candidates_carry_votes_and_tags_and_no_pool_is_one_error)
    with pytest.raises(EmptySplitError, match=r"split 'train' is empty"):
        MatrixEvaluation(config, ["AnswerBot"], output_dir=tmp_path).evaluate()
    assert not (tmp_path / "predictions" / "AnswerBot.jsonl").exists()


def test_plan_lists_every_baseline_with_its_retriever_and_stand_ins():
    from tiny_config import TINY

    from graphctx.pipeline.config_file import load_config
    from graphctx.stack.model_stack import ModelStack
    from graphctx.stack.report import plan_json, plan_text

    plan = ModelStack(load_config(TINY))
    listed = plan_json(plan)["baselines"]
    assert set(listed) == set(BASELINE_VARIANTS)
    assert listed["AnswerBot"]["embedding_model"] == plan.embedder.source
    assert "question retrieval" in listed["AnswerBot"]["stand_ins"]
    assert "usefulness" in listed["TechSumBot"]["stand_ins"]
    assert "baseline     TechSumBot: retrieval dense" in plan_text(plan)
