"""Instruction examples: the paper's format, loss on answer tokens only, truncation, packing, batches."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from graphctx.data import DataModuleSettings, DatasetSettings, FilterSettings
from graphctx.data.datamodule import InstructionDataModule
from graphctx.data.instruct import IGNORE_INDEX, TEMPLATES, encode_example, get_template, prompt_ids
from graphctx.data.packing import collate_rows, epoch_batches, pack_rows

QUESTION = "How do I restart nginx on Ubuntu 22.04?"
ANSWER = "Run `sudo systemctl restart nginx`, then check `journalctl -u nginx` for errors."


def test_paper_template_is_exact():
    assert TEMPLATES["paper"].prompt(QUESTION) == f"[INST]{QUESTION}[\\INST]Answer:"
    assert TEMPLATES["llama2-chat"].prompt(QUESTION) == f"[INST] {QUESTION} [/INST] "
    with pytest.raises(ValueError, match="choose one of"):
        get_template("alpaca")


def test_loss_falls_on_answer_tokens_only(llama_tokenizer):
    example = encode_example(llama_tokenizer, TEMPLATES["paper"], QUESTION, ANSWER, max_length=512)
    ids, labels = example["input_ids"], example["labels"]
    assert len(ids) == len(labels)
    answer_start = next(i for i, label in enumerate(labels) if label != IGNORE_INDEX)
    assert all(label == IGNORE_INDEX for label in labels[:answer_start])
    assert labels[answer_start:] == ids[answer_start:]
    assert labels[-1] == llama_tokenizer.eos_token_id
    assert llama_tokenizer.decode(labels[answer_start:-1]) == ANSWER
    assert (
        llama_tokenizer.decode(ids[:answer_start], skip_special_tokens=True)
        == f"[INST]{QUESTION}[\\INST]Answer:"
    )


EXACT = {
    "paper": lambda question, answer: "[INST]" + question + "[\\INST]Answer:" + answer,
    "llama2-chat": lambda question, answer: "[INST] " + question + " [/INST] " + answer,
}


@pytest.mark.parametrize("template", list(EXACT))
@pytest.mark.parametrize("tokenizer_name", ["llama_tokenizer", "smollm2_tokenizer"])
def test_training_examples_decode_to_the_exact_template_string(
    request, cardano_rows, template, tokenizer_name
):
    """Every cardano example is exactly the template's string (no space invented between pieces), loss on the
    answer only; answers whose first token merges with the prompt's last (``Answer:`` + ``**``) included."""
    tokenizer = request.getfixturevalue(tokenizer_name)
    assert any(row["answer"].startswith("*") for row in cardano_rows)  # ':' + '**' is one token
    for row in cardano_rows:
        question, answer = row["question"], row["answer"]
        example = encode_example(tokenizer, TEMPLATES[template], question, answer, max_length=100_000)
        ids, labels = example["input_ids"], example["labels"]
        assert tokenizer.decode(ids, skip_special_tokens=True) == EXACT[template](question, answer)
        prompt = prompt_ids(tokenizer, TEMPLATES[template].prompt(question))
        assert ids[: len(prompt)] == prompt and labels[: len(prompt)] == [IGNORE_INDEX] * len(prompt)
        assert labels[len(prompt) :] == ids[len(prompt) :] and ids[-1] == tokenizer.eos_token_id


def test_truncation_cuts_the_question_first_and_never_drops_the_answer(llama_tokenizer):
    long_question = QUESTION + " " + "The service fails with a bind error. " * 200
    example = encode_example(
        llama_tokenizer, TEMPLATES["paper"], long_question, ANSWER, max_length=64, min_prompt_tokens=16
    )
    answer_tokens = [label for label in example["labels"] if label != IGNORE_INDEX]
    assert len(example["input_ids"]) <= 64
    assert llama_tokenizer.decode(answer_tokens[:-1]) == ANSWER  # whole answer kept, EOS closes it
    long_answer = ANSWER + " More detail follows." * 200
    example = encode_example(
        llama_tokenizer, TEMPLATES["paper"], long_question, long_answer, max_length=64, min_prompt_tokens=16
    )
    answer_tokens = [label for label in example["labels"] if label != IGNORE_INDEX]
    assert len(example["input_ids"]) == 64
    prompt_length = example["labels"].count(IGNORE_INDEX)
    # the question was cut to min_prompt_tokens first, and the prompt tokenised again as one text
    cut = llama_tokenizer.decode(llama_tokenizer(long_question, add_special_tokens=False)["input_ids"][:16])
    assert example["input_ids"][:prompt_length] == prompt_ids(llama_tokenizer, TEMPLATES["paper"].prompt(cut))
    assert llama_tokenizer.decode(example["input_ids"][:prompt_length], skip_special_tokens=True) == (
        f"[INST]{cut}[\\INST]Answer:"
    )
    assert len(answer_tokens) == 64 - prompt_length
    assert answer_tokens[-1] != llama_tokenizer.eos_token_id  # a cut answer does not teach stopping


def test_best_fit_packing_respects_capacity_and_uses_every_example():
    lengths = [700, 300, 520, 480, 100, 1024, 60, 940, 24]
    rows = pack_rows(lengths, capacity=1024)
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in row) <= 1024 for row in rows)
    assert len(rows) == 5  # 4148 tokens: the fewest rows of 1024 that can hold them
    with pytest.raises(ValueError, match="exceeds the packing capacity"):
        pack_rows([2000], capacity=1024)


def test_packed_rows_keep_examples_separate(llama_tokenizer):
    """A packed row gives every example exactly the logits it gets alone: no attention across examples."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(llama_tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    model = LlamaForCausalLM(config).eval()
    template = TEMPLATES["paper"]
    examples = [
        encode_example(llama_tokenizer, template, q, a, max_length=128)
        for q, a in [
            (QUESTION, ANSWER),
            ("Why is my pool not minting blocks?", "Check the KES key period."),
            ("What does cardano-node --topology do?", "It points the node at its peers."),
        ]
    ]
    packed = collate_rows([examples], pad_id=0, packed=True)
    assert "attention_mask" not in packed
    starts = (packed["position_ids"][0] == 0).nonzero().flatten().tolist()
    assert starts[:3] == [
        0,
        len(examples[0]["input_ids"]),
        len(examples[0]["input_ids"]) + len(examples[1]["input_ids"]),
    ]
    with torch.no_grad():
        # No KV cache: transformers finds packed examples from position_ids only in training-style calls.
        together = model(
            input_ids=packed["input_ids"], position_ids=packed["position_ids"], use_cache=False
        ).logits[0]
        offset = 0
        for example in examples:
            alone = model(input_ids=torch.tensor([example["input_ids"]])).logits[0]
            n = len(example["input_ids"])
            torch.testing.assert_close(together[offset : offset + n], alone, atol=1e-5, rtol=1e-4)
            offset += n


def test_unpacked_batches_pad_with_a_mask_and_ignored_labels(llama_tokenizer):
    examples = [
        encode_example(llama_tokenizer, TEMPLATES["paper"], QUESTION, ANSWER * k, 256) for k in (1, 3)
    ]
    batch = collate_rows([[examples[0]], [examples[1]]], pad_id=0, packed=False)
    short = len(examples[0]["input_ids"])
    assert batch["attention_mask"][0, :short].all() and not batch["attention_mask"][0, short:].any()
    assert (batch["labels"][0, short:] == IGNORE_INDEX).all()


def test_plans_group_by_length_and_are_seeded():
    lengths = list(range(10, 110))
    plan = epoch_batches(lengths, batch_size=10, pack=False, capacity=0, seed=1)
    assert all(
        max(lengths[row[0]] for row in batch) - min(lengths[row[0]] for row in batch) == 9 for batch in plan
    )
    assert plan == epoch_batches(lengths, batch_size=10, pack=False, capacity=0, seed=1)
    assert plan != epoch_batches(lengths, batch_size=10, pack=False, capacity=0, seed=2)


def test_datamodule_serves_packed_batches_from_the_real_dump(cardano_dir, cache_dir, llama_tokenizer):
    settings = DatasetSettings(source=str(cardano_dir), filters=FilterSettings(max_tokens=1024))
    module = InstructionDataModule(
        DataModuleSettings(dataset=settings, max_length=512, batch_size=2, pack=True), str(cache_dir)
    )
    with pytest.raises(RuntimeError, match="attach_tokenizer"):
        module.setup("fit")
    module.attach_tokenizer(llama_tokenizer)
    module.setup("fit")
    train = module.splits["train"]
    n_examples = sum(len(row) for batch in train.batches for row in batch)
    assert n_examples == len(train.examples) > 200
    loader = module.train_dataloader()
    batch = next(iter(loader))
    assert batch["input_ids"].shape[0] <= 2 and batch["input_ids"].shape[1] <= 512
    assert (batch["labels"] != IGNORE_INDEX).any()
    # The loader records its position so a resumed run continues where it stopped.
    state = loader.state_dict()
    assert state["_num_yielded"] == 1
