"""GenQA (Hsu et al., Findings of ACL 2021, "Answer Generation for Retrieval-based Question Answering
Systems"), as the paper's Table 3 runs it (Banerjee et al. 2024, Sec. 5, "Baselines").

GenQA feeds a seq2seq model the question and the top answer candidates an answer-selection model ranked,
and trains it to write the answer (Hsu et al., Sec. 3). Here:

- **Candidates.** *Choice:* the accepted answers of the retrieved questions (``retrieval.top_k``, the pairs
  the LLM variants see) stand in for the answer-selection model's top sentences; a training question's
  candidates are its own neighbours in the training pool, itself left out.
- **Input.** ``question: {q} candidate: {a1} candidate: {a2} ...`` cut to :data:`MAX_SOURCE_TOKENS`
  tokens, the answer cut to :data:`MAX_TARGET_TOKENS` (Hsu et al.'s 5 candidates and lengths are larger;
  the paper's k = 2 decides the number here).
- **Model.** The authors fine-tune T5 / BART; their checkpoint is not public, so GenQA is trained here
  with ``graphctx genqa`` from :data:`DEFAULT_BASE` (any seq2seq model) with the Lightning stack,
  the cross-entropy of the gold answer, AdamW, its steps shown as a :class:`~graphctx.progress.Progress`
  line. The trained folder is a stand-in, named in ``graphctx plan``.
- **Decoding.** Greedy, up to ``generation.max_new_tokens`` tokens, every rule stated (:data:`GREEDY`):
  the model folder's saved generation config (BART's beams and n-gram rule) is replaced, not inherited.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    GenerationConfig,
    PretrainedConfig,
    PreTrainedTokenizerBase,
)

from graphctx.baselines.candidates import Candidate
from graphctx.errors import ConfigError
from graphctx.progress import Progress

DEFAULT_BASE = "facebook/bart-large"
"""The seq2seq model ``graphctx genqa`` fine-tunes by default (Hsu et al.'s BART-large)."""
MAX_SOURCE_TOKENS = 1024
MAX_TARGET_TOKENS = 256


def source_text(question: str, answers: Sequence[str]) -> str:
    """GenQA's input: the question, then each candidate answer."""
    return f"question: {question.strip()} " + " ".join(f"candidate: {a.strip()}" for a in answers)


def encode_examples(
    tokenizer: PreTrainedTokenizerBase,
    questions: Sequence[str],
    answers: Sequence[Sequence[str]],
    golds: Sequence[str],
) -> list[dict[str, list[int]]]:
    """Token ids of each (source, gold answer) pair, cut to the length limits."""
    return [
        {
            "input_ids": tokenizer(source_text(q, a), truncation=True, max_length=MAX_SOURCE_TOKENS)[
                "input_ids"
            ],
            "labels": tokenizer(text_target=g, truncation=True, max_length=MAX_TARGET_TOKENS)["input_ids"],
        }
        for q, a, g in zip(questions, answers, golds, strict=True)
    ]


def collate(examples: Sequence[dict[str, list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded batch; padded label positions are -100 (left out of the loss)."""

    def pad(key: str, value: int) -> torch.Tensor:
        width = max(len(e[key]) for e in examples)
        return torch.tensor([e[key] + [value] * (width - len(e[key])) for e in examples])

    input_ids = pad("input_ids", pad_id)
    return {
        "input_ids": input_ids,
        "attention_mask": (input_ids != pad_id).long(),
        "labels": pad("labels", -100),
    }


class StepProgress(L.Callback):
    """The training's :class:`~graphctx.progress.Progress`: optimiser steps done of the steps the
    ``Trainer`` will run (``estimated_stepping_batches``: ``max_steps``, or the epochs' batches), with the
    last loss."""

    def __init__(self) -> None:
        self.progress: Progress | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.progress = Progress("genqa training", int(trainer.estimated_stepping_batches), "steps")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if self.progress is None:
            return
        loss = trainer.callback_metrics.get("train_loss")
        note = None if loss is None else f"epoch {trainer.current_epoch}, train_loss {float(loss):.4f}"
        self.progress.advance(trainer.global_step - self.progress.done, note)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.progress is not None:
            self.progress.close()


class GenQAModule(L.LightningModule):
    """A seq2seq model trained on the gold answer's cross-entropy, ``-Σ_t log p(y_t | y_<t, source)``."""

    def __init__(self, model: torch.nn.Module, learning_rate: float) -> None:
        super().__init__()
        self.model = model.train()  # from_pretrained returns it in eval mode: dropout on for training
        self.learning_rate = learning_rate

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self.model(**batch).loss
        self.log("train_loss", loss, prog_bar=True, batch_size=batch["input_ids"].shape[0])
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.model.parameters(), lr=self.learning_rate)


def train(
    base: str,
    examples: Sequence[dict[str, list[int]]],
    output_dir: Path,
    epochs: int = 3,
    batch_size: int = 8,
    learning_rate: float = 3e-5,
    max_steps: int = -1,
) -> GenQAModule:
    """Fine-tune ``base`` on ``examples`` with a Lightning ``Trainer``; the model and its tokenizer are
    saved to ``output_dir`` (written under a temporary name, then renamed)."""
    from graphctx.cache import atomic_path

    tokenizer = AutoTokenizer.from_pretrained(base)
    module = GenQAModule(AutoModelForSeq2SeqLM.from_pretrained(base), learning_rate)
    loader = torch.utils.data.DataLoader(
        list(examples),
        batch_size=batch_size,
        shuffle=True,
        collate_fn=lambda b: collate(b, tokenizer.pad_token_id),
    )
    trainer = L.Trainer(
        max_epochs=epochs,
        max_steps=max_steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        deterministic=True,
        callbacks=[StepProgress()],
    )
    trainer.fit(module, loader)
    with atomic_path(output_dir) as tmp:
        module.model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return module


GREEDY = {
    "do_sample": False,
    "num_beams": 1,
    "no_repeat_ngram_size": 0,
    "repetition_penalty": 1.0,
    "length_penalty": 1.0,
    "min_new_tokens": 0,
    "early_stopping": False,
}
"""GenQA's decoding, every rule stated (the paper states none): greedy, no repetition, length or beam rule.
A saved ``generation_config.json`` (BART's: 4 beams, no repeated trigram, length penalty 2, forced BOS) is
replaced, not merged: ``generate`` fills every value left at its default from the model's own config."""


def greedy_config(config: PretrainedConfig, max_new_tokens: int) -> GenerationConfig:
    """:data:`GREEDY` with ``max_new_tokens`` and the model's special-token ids (from its ``config.json``:
    decoder start, BOS, EOS, PAD), nothing else (no forced first or last token)."""
    tokens = ("decoder_start_token_id", "bos_token_id", "eos_token_id", "pad_token_id")
    return GenerationConfig(
        max_new_tokens=max_new_tokens, **GREEDY, **{name: getattr(config, name, None) for name in tokens}
    )


class GenQAAnswerer:
    """Answers with a trained GenQA folder (``evaluation.genqa_model``)."""

    def __init__(self, folder: str | Path, max_new_tokens: int, device: str | torch.device = "cpu") -> None:
        folder = Path(folder)
        if not (folder / "config.json").is_file():
            raise ConfigError(
                f"evaluation.genqa_model: no trained GenQA model in {folder}; train one with "
                "`graphctx genqa --config CONFIG` (or point evaluation.genqa_model at one)"
            )
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForSeq2SeqLM.from_pretrained(folder).to(device).eval()
        # the model's own generation config is what generate() fills unset values from: replace it
        self.model.generation_config = greedy_config(self.model.config, max_new_tokens)

    @torch.no_grad()
    def __call__(self, question: str, candidates: Sequence[Candidate]) -> str:
        encoded = self.tokenizer(
            source_text(question, [c.answer for c in candidates]),
            truncation=True,
            max_length=MAX_SOURCE_TOKENS,
            return_tensors="pt",
        ).to(self.model.device)
        ids: Any = self.model.generate(**encoded)
        return self.tokenizer.decode(ids[0], skip_special_tokens=True).strip()
