"""MiniCheck: the authors' chunking and scoring, matched against what their code (Liyan06/MiniCheck,
commit b58b9fa, ``minicheck/inference.py``'s ``Inferencer``, Flan-T5 path) produced for the same
documents, claims and tiny random T5 (conftest.py's ``tiny_t5``: the weights of their run, seed 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from graphctx.errors import ConfigError
from graphctx.metrics.minicheck import (
    MiniCheck,
    MiniCheckSettings,
    document_chunks,
    document_sentences,
    load_checker,
)

SHORT_DOC = (
    "To delegate ADA, open Daedalus or Yoroi, pick a stake pool and sign a delegation certificate.  "
    "The deposit of 2 ADA is returned when you deregister.\n\n"
    "Dr. Smith runs pool No. 5 in the U.S. since Jan. 2021.\nIt charges 340 ADA per epoch."
)
LONG_DOC = (
    " ".join(f"Stake pool number {i} pays rewards every epoch, e.g. after 5 days." for i in range(60))
    + "\nA ledger is a record. Mr. Jones keeps one at 3 p.m. daily.\n \nEnd."
)
NO_STOP_DOC = "One sentence only without a full stop"
DOCS = [SHORT_DOC, LONG_DOC, NO_STOP_DOC]
CLAIMS = ["The deposit is 2 ADA.", "Rewards come every epoch.", "Something."]

# Their Inferencer's max_support_probs on the tiny T5 below, chunk_size 500 and 12 (max_model_len 2048),
# and chunk_size 12 with max_model_len 24; and support_prob_per_chunk of SHORT_DOC at chunk_size 12.
AUTHORS_MAX_PROBS = {
    (500, 2048): [0.4167255759239197, 0.4473522901535034, 0.44015106558799744],
    (12, 2048): [0.4762207567691803, 0.5466592311859131, 0.44015106558799744],
    (12, 24): [0.56220942735672, 0.5559529066085815, 0.46679243445396423],
}
AUTHORS_SHORT_DOC_CHUNK_PROBS = [
    0.4682466387748718,
    0.3413352966308594,
    0.3819984793663025,
    0.4762207567691803,
]


def _settings(folder: Path, **changes) -> MiniCheckSettings:
    return MiniCheckSettings(model=str(folder), device="cpu", batch_size=3, **changes)


def _scored(folder: Path, claims: list[str], docs: list[str], **changes) -> dict[str, list[float]]:
    settings = _settings(folder, **changes)
    metric = MiniCheck(load_checker(settings), settings)
    metric.update(claims, docs)
    return {key: rows.tolist() for key, rows in metric.per_row().items()}


def test_sentences_are_nltk_punkt_per_line_with_newline_items_as_theirs():
    assert document_sentences(SHORT_DOC) == [
        "To delegate ADA, open Daedalus or Yoroi, pick a stake pool and sign a delegation certificate.",
        "The deposit of 2 ADA is returned when you deregister.",
        "\n",
        "\n",
        "Dr. Smith runs pool No.",
        "5 in the U.S. since Jan. 2021.",
        "\n",
        "It charges 340 ADA per epoch.",
    ]
    # English Punkt's abbreviations ("Dr.", "Mr.", "p.m.") end no sentence, while "No." before a number
    # and "e.g." do; a blank or space-only line gives only its newline item.
    assert document_sentences(LONG_DOC)[:2] == [
        "Stake pool number 0 pays rewards every epoch, e.g.",
        "after 5 days.",
    ]
    assert document_sentences(LONG_DOC)[-6:] == [
        "\n",
        "A ledger is a record.",
        "Mr. Jones keeps one at 3 p.m. daily.",
        "\n",
        "\n",
        "End.",
    ]


def test_chunks_are_theirs_word_for_word():
    assert document_chunks(SHORT_DOC, 500) == [
        "To delegate ADA, open Daedalus or Yoroi, pick a stake pool and sign a delegation certificate. "
        "The deposit of 2 ADA is returned when you deregister.\n\n Dr. Smith runs pool No. 5 in the U.S. "
        "since Jan. 2021.\nIt charges 340 ADA per epoch."
    ]
    assert document_chunks(SHORT_DOC, 12) == [
        "To delegate ADA, open Daedalus or Yoroi, pick a stake pool and sign a delegation certificate.",
        "The deposit of 2 ADA is returned when you deregister.",
        "Dr. Smith runs pool No. 5 in the U.S. since Jan. 2021.",
        "It charges 340 ADA per epoch.",
    ]
    first, second = document_chunks(LONG_DOC, 500)
    assert [len(first.split()), len(second.split())] == [492, 242]
    assert first.endswith("Stake pool number 40 pays rewards every epoch, e.g. after 5 days.")
    assert second.startswith("Stake pool number 41 pays rewards every ")
    assert second.endswith("A ledger is a record. Mr. Jones keeps one at 3 p.m. daily.\n\n End.")
    assert len(document_chunks(LONG_DOC, 12)) == 62
    assert document_chunks(NO_STOP_DOC, 3) == [NO_STOP_DOC]  # a sentence over the size is its own chunk


def test_a_premise_without_text_is_one_empty_chunk():
    assert document_chunks("", 500) == [""]
    assert document_chunks(" \n \n", 500) == [""]


def test_checker_input_is_theirs(tiny_t5):
    checker = load_checker(_settings(tiny_t5))
    assert checker.texts(["chunk one"], ["the claim"]) == ["predict: chunk one</s>the claim"]


@pytest.mark.parametrize(("chunk_size", "max_input_tokens"), sorted(AUTHORS_MAX_PROBS))
def test_row_scores_are_their_max_support_probs(tiny_t5, chunk_size, max_input_tokens):
    rows = _scored(tiny_t5, CLAIMS, DOCS, chunk_size=chunk_size, max_input_tokens=max_input_tokens)
    expected = AUTHORS_MAX_PROBS[(chunk_size, max_input_tokens)]
    torch.testing.assert_close(rows["minicheck_prob"], expected, rtol=0, atol=1e-5)
    assert rows["minicheck"] == [float(p > 0.5) for p in expected]
    # At 24 tokens every row has an input that is cut (the shortest, NO_STOP_DOC's, takes 27).
    assert rows["minicheck_truncated"] == [float(max_input_tokens == 24)] * 3


def test_each_chunk_is_scored_as_theirs_and_the_row_takes_the_max(tiny_t5):
    checker = load_checker(_settings(tiny_t5))
    chunks = document_chunks(SHORT_DOC, 12)
    probs, cut = checker.support(chunks, [CLAIMS[0]] * len(chunks))
    torch.testing.assert_close(probs.tolist(), AUTHORS_SHORT_DOC_CHUNK_PROBS, rtol=0, atol=1e-5)
    assert not cut.any()
    assert _scored(tiny_t5, CLAIMS[:1], DOCS[:1], chunk_size=12)["minicheck_prob"] == [probs.max().item()]


def test_support_is_p_of_token_209_against_3_after_the_start_token(tiny_t5):
    """Step 4 recomputed by hand: one decoder step from id 0, softmax over logits 3 and 209."""
    checker = load_checker(_settings(tiny_t5))
    text = checker.texts([SHORT_DOC], [CLAIMS[0]])[0]
    encoded = checker.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        start = torch.zeros((1, 1), dtype=torch.long)
        logits = checker.model(**encoded, decoder_input_ids=start).logits[0, 0]
    expected = torch.softmax(logits[[3, 209]], -1)[1].item()
    assert checker.support([SHORT_DOC], [CLAIMS[0]])[0].item() == pytest.approx(expected, abs=1e-6)


def test_an_empty_answer_scores_zero_without_a_checker_call(tiny_t5):
    rows = _scored(tiny_t5, ["  ", CLAIMS[0]], [SHORT_DOC, SHORT_DOC])
    assert rows["minicheck"][0] == rows["minicheck_prob"][0] == 0.0
    assert rows["minicheck_prob"][1] == pytest.approx(AUTHORS_MAX_PROBS[(500, 2048)][0], abs=1e-5)
    assert _scored(tiny_t5, [""], [SHORT_DOC])["minicheck_prob"] == [0.0]


def test_two_ranks_merge_to_the_single_process_result(tiny_t5):
    settings = _settings(tiny_t5, chunk_size=12)
    checker = load_checker(settings)
    single, rank0, rank1 = (MiniCheck(checker, settings) for _ in range(3))
    single.update(CLAIMS, DOCS)
    rank0.update(CLAIMS[:1], DOCS[:1])
    rank1.update(CLAIMS[1:], DOCS[1:])
    rank1.merge_state(rank0)
    for key, value in single.compute().items():
        torch.testing.assert_close(rank1.compute()[key], value)
    for key, rows in single.per_row().items():
        torch.testing.assert_close(rank1.per_row()[key], rows)


def test_a_missing_checkpoint_is_one_line_naming_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError) as error:
        load_checker(MiniCheckSettings(model=str(tmp_path / "no-such-model"), device="cpu"))
    message = str(error.value)
    assert message.startswith("evaluation.metrics.minicheck.model: cannot load ")
    assert "\n" not in message


def test_settings_ranges_are_checked():
    with pytest.raises(ConfigError, match="chunk_size"):
        MiniCheckSettings(chunk_size=0)


def test_minicheck_runs_through_the_registry_as_a_named_extension(tiny_t5):
    from graphctx.evaluation.matrix.scorer import Scorer
    from graphctx.metrics.registry import entries_named
    from graphctx.pipeline.config_file import load_config
    from graphctx.stack.model_stack import ModelStack
    from graphctx.stack.report import plan_json

    tiny = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"
    extra = f'[{{"class_path": "minicheck", "init_args": {{"model": "{tiny_t5}", "chunk_size": 12}}}}]'
    plan = ModelStack(load_config(tiny, ["--evaluation.metrics.extra", extra]))
    (entry,) = entries_named(plan.metrics, ["minicheck"], "test")
    rows = Scorer([entry], None, device="cpu").score(
        ["q"] * 2, [CLAIMS[0], CLAIMS[0]], ["g"] * 2, [SHORT_DOC, None]
    )
    key = f"minicheck[{tiny_t5.name}]"  # another checker than the authors' is named in every key
    assert rows[0][key] == float(AUTHORS_MAX_PROBS[(12, 2048)][0] > 0.5)
    assert rows[0][f"minicheck_prob[{tiny_t5.name}]"] == pytest.approx(
        AUTHORS_MAX_PROBS[(12, 2048)][0], abs=1e-5
    )
    assert all(value != value for value in rows[1].values())  # no context: not judged (NaN)
    report = plan_json(plan)
    assert (
        report["metrics"]["minicheck"]["extension"]
        and report["metrics"]["minicheck"]["available"] == "folder"
    )
    assert "evaluation.metrics.minicheck" in {item["key"] for item in report["extensions"]}
    assert "evaluation.metrics.extra.minicheck.model" in {item["key"] for item in report["stand_ins"]}


def test_a_missing_minicheck_checkpoint_is_one_line_before_anything_runs(tmp_path):
    from graphctx.pipeline.config_file import load_config
    from graphctx.stack.model_stack import ModelStack, check_models

    tiny = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"
    missing = tmp_path / "no-checker"
    extra = f'[{{"class_path": "minicheck", "init_args": {{"model": "{missing}"}}}}]'
    with pytest.raises(ConfigError) as error:
        check_models(ModelStack(load_config(tiny, ["--evaluation.metrics.extra", extra])), "evaluate")
    assert "\n" not in str(error.value) and "evaluation.metrics.extra.minicheck.model" in str(error.value)
