"""Instruction format of the paper and tokenisation with loss on answer tokens only.

The paper trains on ``[INST]{question}[\\INST]Answer:{answer}`` (backslash as printed in the paper);
Llama-2-chat's ``[INST] {question} [/INST] {answer}`` is the alternative. The model sees exactly that
string: the prompt is tokenised as one text by :func:`prompt_ids`, which inference uses too (so a
fine-tuned model's prompt at evaluation is its training prompt token for token), and the answer as the
prompt's continuation (:func:`continuation_ids`). ``labels`` is -100 on BOS and the prompt, and equals
``input_ids`` on the answer and the closing EOS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from graphctx.errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


IGNORE_INDEX = -100


@dataclass(frozen=True)
class InstructionTemplate:
    """Text placed before and after the question; the answer follows ``suffix`` directly."""

    prefix: str
    suffix: str

    def prompt(self, question: str) -> str:
        """The prompt text for a question (or for ``with_context(question, context)``)."""
        return f"{self.prefix}{question}{self.suffix}"


TEMPLATES: dict[str, InstructionTemplate] = {
    "paper": InstructionTemplate(prefix="[INST]", suffix="[\\INST]Answer:"),
    "llama2-chat": InstructionTemplate(prefix="[INST] ", suffix=" [/INST] "),
}


def with_context(question: str, context: str | None) -> str:
    """The question slot of a prompt: the context (when given), a blank line, the question."""
    return f"{context}\n\n{question}" if context else question


def get_template(name: str) -> InstructionTemplate:
    """A template by name, with the valid names in the error."""
    if name not in TEMPLATES:
        raise ValueError(f"unknown instruction template {name!r}; choose one of {sorted(TEMPLATES)}")
    return TEMPLATES[name]


def leading_bos(tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """``[bos]`` when the tokenizer adds BOS on its own (Llama), else ``[]`` (SmolLM2, GPT-2)."""
    bos = tokenizer.bos_token_id
    ids = tokenizer("x")["input_ids"]
    return [bos] if bos is not None and ids and ids[0] == bos else []


def _ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


def prompt_ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """Token ids of a prompt as the model sees it, in training and at inference: BOS (when the tokenizer
    adds one), then ``text`` tokenised as one string up to its last non-space character.

    Trailing space (llama2-chat's ``[/INST] ``) goes to the answer's first token, as SentencePiece and
    byte-level BPE tokenizers attach a space to the word after it (Llama-2-chat's ``[/INST]``, ``▁answer``).
    """
    return leading_bos(tokenizer) + _ids(tokenizer, text.rstrip())


def continuation_ids(tokenizer: PreTrainedTokenizerBase, prompt: str, answer: str) -> list[int]:
    """Token ids of ``answer`` continuing ``prompt``: ``prompt_ids(prompt)`` followed by these decodes to
    ``prompt + answer``.

    The whole string is tokenised and the prompt's tokens are taken off its front. When the prompt's last
    token merges with the answer's first (``Answer:`` + ``**`` is ``:**``; 17 of the 452 cardano answers
    with the paper template), the prompt's tokens are no prefix of the whole: the answer is then tokenised
    after a line break, which SentencePiece (Llama) and byte-level BPE (SmolLM2) keep a token of its own, so
    no word-start space is invented; a tokenizer that merges the break too gets the answer tokenised alone.
    """
    head = prompt.rstrip()
    tail = prompt[len(head) :] + answer
    start, whole = _ids(tokenizer, head), _ids(tokenizer, head + tail)
    if whole[: len(start)] == start:
        return whole[len(start) :]
    anchor, anchored = _ids(tokenizer, "\n"), _ids(tokenizer, "\n" + tail)
    return anchored[len(anchor) :] if anchored[: len(anchor)] == anchor else _ids(tokenizer, tail)


def _prompt_and_target(
    tokenizer: PreTrainedTokenizerBase, prompt: str, answer: str
) -> tuple[list[int], list[int]]:
    """The prompt's ids and the answer's ids closed by EOS."""
    target = [*continuation_ids(tokenizer, prompt, answer), tokenizer.eos_token_id]
    return prompt_ids(tokenizer, prompt), target


def encode_example(
    tokenizer: PreTrainedTokenizerBase,
    template: InstructionTemplate,
    question: str,
    answer: str,
    max_length: int,
    min_prompt_tokens: int = 64,
) -> dict[str, list[int]]:
    """Token ids and labels of one training example, at most ``max_length`` tokens; decoded (special tokens
    skipped) they read exactly ``template.prompt(question) + answer``.

    When the example is too long the question is cut first, to its first ``min(len(question),
    min_prompt_tokens)`` tokens at the least (the cut question is decoded and the prompt tokenised again as
    one text); only then is the answer cut, and it keeps the rest of the budget, so truncation never drops
    the whole answer. EOS closes an answer kept whole; a cut answer loses its EOS first (the model must not
    learn to stop mid-answer).
    """
    prompt, target = _prompt_and_target(tokenizer, template.prompt(question), answer)
    if len(prompt) + len(target) > max_length:
        question_ids = _ids(tokenizer, question)
        overhead = len(prompt) - len(question_ids)  # BOS and the template around the question
        floor = min(len(question_ids), min_prompt_tokens)
        kept = max(floor, max_length - overhead - len(target))
        while kept < len(question_ids):  # the question is cut: tokenise the cut prompt as one text again
            cut = tokenizer.decode(question_ids[:kept], clean_up_tokenization_spaces=False)
            prompt, target = _prompt_and_target(tokenizer, template.prompt(cut), answer)
            over = len(prompt) + len(target) - max_length
            if over <= 0 or kept == floor:
                break
            kept = max(floor, kept - over)
        if len(prompt) >= max_length:
            raise ConfigError(
                f"data.max_length: {max_length} tokens leave no room for the answer: the prompt alone takes "
                f"{len(prompt)}, its question cut to {floor} tokens (data.min_prompt_tokens); raise "
                "data.max_length"
            )
        target = target[: max_length - len(prompt)]
    return {"input_ids": prompt + target, "labels": [IGNORE_INDEX] * len(prompt) + target}
