"""GenQA: a Lightning training step of a tiny random BART (byte-level BPE trained here, BART's kind), its
answers, the one-line error without a trained model, and `graphctx genqa` on the real cardano pool."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import BartConfig, BartForConditionalGeneration, BartTokenizerFast

from graphctx.baselines import Candidate
from graphctx.baselines.genqa import GenQAAnswerer, collate, encode_examples, source_text, train
from graphctx.errors import ConfigError

SENTENCES = [
    "How do I restart nginx after changing the config?",
    "Run sudo systemctl restart nginx and check the logs.",
    "Mount the usb drive with mount and list it with lsblk.",
    "Cardano stake pools need a relay node and a block producer.",
]


def tiny_bart(folder: Path) -> Path:
    """A 1-layer random BART (width 16) with a byte-level BPE tokenizer, saved to ``folder``."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(SENTENCES * 20, vocab_size=300, special_tokens=["<s>", "<pad>", "</s>", "<unk>"])
    folder.mkdir(parents=True)
    bpe.save_model(str(folder))
    tokenizer = BartTokenizerFast.from_pretrained(folder, model_max_length=1024)
    torch.manual_seed(0)
    config = BartConfig(
        vocab_size=len(tokenizer), d_model=16, encoder_layers=1, decoder_layers=1,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
        max_position_embeddings=1100, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    BartForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_source_text_and_collate_mask_the_padding():
    assert source_text(" q? ", ["a1 ", "a2"]) == "question: q? candidate: a1 candidate: a2"
    batch = collate([{"input_ids": [5, 6, 7], "labels": [8]}, {"input_ids": [5], "labels": [8, 9]}], pad_id=1)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [5, 1, 1]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["labels"].tolist() == [[8, -100], [8, 9]]


def test_one_lightning_training_step_changes_the_weights_and_the_trained_folder_answers(tmp_path):
    base = tiny_bart(tmp_path / "base")
    tokenizer = BartTokenizerFast.from_pretrained(base)
    examples = encode_examples(tokenizer, SENTENCES[:2], [[SENTENCES[2]], [SENTENCES[3]]], SENTENCES[1:3])
    before = BartForConditionalGeneration.from_pretrained(base).state_dict()
    module = train(
        base, examples, tmp_path / "genqa", epochs=1, batch_size=2, learning_rate=1e-2, max_steps=1
    )
    assert module.trainer.global_step == 1
    after = BartForConditionalGeneration.from_pretrained(tmp_path / "genqa").state_dict()
    changed = [name for name in before if not torch.equal(before[name], after[name])]
    assert changed and (tmp_path / "genqa" / "tokenizer.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base", "genqa"]  # no temporary left
    answer = GenQAAnswerer(tmp_path / "genqa", max_new_tokens=6)(SENTENCES[0], [Candidate("q", SENTENCES[1])])
    assert isinstance(answer, str)
    assert answer == GenQAAnswerer(tmp_path / "genqa", max_new_tokens=6)(
        SENTENCES[0], [Candidate("q", SENTENCES[1])]
    )


def test_genqa_without_a_trained_model_is_one_error_line(tmp_path):
    with pytest.raises(
        ConfigError, match=r"^evaluation.genqa_model: no trained GenQA model in .*graphctx genqa"
    ):
        GenQAAnswerer(tmp_path / "nothing", max_new_tokens=4)


def test_evaluate_with_genqa_but_no_trained_model_fails_before_anything(tmp_path):
    from tiny_config import TINY

    from graphctx.pipeline.config_file import load_config
    from graphctx.prompts import get_variants
    from graphctx.stack.model_stack import ModelStack, check_models
    from graphctx.stack.report import plan_json

    config = load_config(TINY, ["--evaluation.genqa_model", str(tmp_path / "absent")])
    assert plan_json(ModelStack(config))["baselines"]["GenQA"]["model_available"] == "missing"
    with pytest.raises(ConfigError, match=r"^evaluation.genqa_model: no trained GenQA model in .*absent"):
        check_models(ModelStack(config), "evaluate", get_variants(["GenQA"]))
    check_models(
        ModelStack(config), "evaluate", get_variants(["AnswerBot"])
    )  # the others need no GenQA model


@pytest.mark.slow
def test_graphctx_genqa_trains_on_the_pool_and_evaluate_answers_with_it(tmp_path, cardano_dir, tiny_bert):
    from evaluation_workspace import write_workspace

    from graphctx.cli import main as cli_main
    from graphctx.evaluation.jsonl import read_records
    from graphctx.evaluation.matrix.runner import MatrixEvaluation
    from graphctx.pipeline.config_file import load_config

    evaluation = {"output_dir": str(tmp_path / "out"), "limit": 2, "bootstrap_samples": 20}
    evaluation["genqa_model"] = str(tmp_path / "genqa")
    config = write_workspace(tmp_path, cardano_dir, tiny_bert, "tiny.yaml", evaluation)
    base = tiny_bart(tmp_path / "bart")
    args = ["genqa", "--config", str(config), "--base", str(base), "--max-steps", "2", "--limit", "4"]
    assert cli_main([*args, "--batch-size", "2"]) == 0
    assert (tmp_path / "genqa" / "config.json").is_file()
    MatrixEvaluation(load_config(config), ["GenQA"]).evaluate()
    predictions = read_records(tmp_path / "out" / "predictions" / "GenQA.jsonl")
    assert len(predictions) == 2 and {p["stop"] for p in predictions} == {"no_llm"}
    assert cli_main([*args[:-4], "--max-steps", "1", "--limit", "4", "--batch-size", "2"]) == 0  # retrained
    with pytest.raises(
        ConfigError, match="GenQA were made with other settings"
    ):  # never mixed with old answers
        MatrixEvaluation(load_config(config), ["GenQA"]).evaluate()


def _greedy_by_hand(model, tokenizer, text: str, steps: int) -> str:
    """Argmax decoding step by step from the decoder start token, stopping at EOS."""
    config = model.config
    encoded = tokenizer(text, return_tensors="pt")
    ids = [config.decoder_start_token_id]
    with torch.no_grad():
        for _ in range(steps):
            logits = model(**encoded, decoder_input_ids=torch.tensor([ids])).logits[0, -1]
            token = int(logits.argmax())
            ids.append(token)
            if token == config.eos_token_id:
                break
    return tokenizer.decode(ids, skip_special_tokens=True).strip()


def test_genqa_decodes_greedily_whatever_generation_config_the_model_folder_saved(tmp_path):
    folder = tiny_bart(tmp_path / "genqa")
    model = BartForConditionalGeneration.from_pretrained(folder)
    model.generation_config.update(num_beams=4, no_repeat_ngram_size=1, length_penalty=2.0, min_length=5)
    model.generation_config.save_pretrained(folder)  # what BART checkpoints ship: beams, no repeats
    tokenizer = BartTokenizerFast.from_pretrained(folder)
    source = source_text(SENTENCES[0], [SENTENCES[1]])
    expected = _greedy_by_hand(model.eval(), tokenizer, source, steps=8)
    assert GenQAAnswerer(folder, max_new_tokens=8)(SENTENCES[0], [Candidate("q", SENTENCES[1])]) == expected


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--epochs", "0"], "error: --epochs 0: must be at least 1"),
        (["--epochs", "-1"], "error: --epochs -1: must be at least 1"),
        (["--batch-size", "0"], "error: --batch-size 0: must be at least 1"),
        (["--limit", "-1"], "error: --limit -1: must be at least 1 (omit it to train on every question)"),
        (["--limit", "0"], "error: --limit 0: must be at least 1 (omit it to train on every question)"),
        (["--max-steps", "0"], "error: --max-steps 0: must be at least 1, or -1 for no limit"),
    ],
)
def test_genqa_counts_that_would_train_nothing_are_one_error_line(argv, error, tmp_path, capsys):
    from graphctx.cli import main

    config = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"
    assert main(["genqa", "--config", str(config), "--cache_dir", str(tmp_path), *argv]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [error]
    assert not any(tmp_path.iterdir())  # nothing read, nothing saved


def test_genqa_refuses_a_causal_lm_base_in_one_line(tmp_path, capsys):
    from transformers import LlamaConfig, LlamaForCausalLM

    from graphctx.cli import main

    base = tmp_path / "llama"
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
    )
    LlamaForCausalLM(config).save_pretrained(base)
    tiny = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"
    argv = ["genqa", "--config", str(tiny), "--base", str(base), "--cache_dir", str(tmp_path / "c")]
    capsys.readouterr()
    assert main(argv) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: --base {base}: a llama model is not an encoder-decoder; GenQA fine-tunes a seq2seq model "
        "(BART, T5)"
    ]
