"""Instruction format of the paper and tokenisation with loss on answer tokens only.

The paper trains on ``[INST]{question}[\\INST]Answer:{answer}`` (backslash as printed in the paper);
Llama-2-chat's ``[INST] {question} [/INST] {answer}`` is the alternative. Each piece is tokenised on its
own so the prompt/answer boundary is exact: ``labels`` is -100 on BOS and the prompt, and equals
``input_ids`` on the answer and the closing EOS.
"""

from __future__ import annotations

from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

IGNORE_INDEX = -100


@dataclass(frozen=True)
class InstructionTemplate:
    """Text placed before and after the question; the answer follows ``suffix`` directly."""

    prefix: str
    suffix: str

    def prompt(self, question: str, context: str | None = None) -> str:
        """The prompt text for a question, optionally preceded by retrieved context."""
        return f"{self.prefix}{with_context(question, context)}{self.suffix}"


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


def encode_example(
    tokenizer: PreTrainedTokenizerBase,
    template: InstructionTemplate,
    question: str,
    answer: str,
    max_length: int,
    min_prompt_tokens: int = 64,
    context: str | None = None,
) -> dict[str, list[int]]:
    """Token ids and labels of one training example, at most ``max_length`` tokens.

    When the example is too long the question (with its context) is cut first, down to
    ``min(len(question), min_prompt_tokens)`` tokens; only then is the answer cut, and it keeps the rest of
    the budget, so truncation never drops the whole answer. EOS closes an answer kept whole; a cut answer
    loses its EOS first (the model must not learn to stop mid-answer).
    """

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    bos, prefix, question_ids = (
        leading_bos(tokenizer),
        ids(template.prefix),
        ids(with_context(question, context)),
    )
    suffix, target = ids(template.suffix), [*ids(answer), tokenizer.eos_token_id]
    room = max_length - len(bos) - len(prefix) - len(suffix)
    question_floor = min(len(question_ids), min_prompt_tokens)
    if room <= question_floor:
        raise ValueError(f"max_length={max_length} leaves no room for the answer with this template")
    target = target[: room - question_floor]
    prompt = bos + prefix + question_ids[: room - len(target)] + suffix
    return {"input_ids": prompt + target, "labels": [IGNORE_INDEX] * len(prompt) + target}
