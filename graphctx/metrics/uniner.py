"""UniversalNER entity sets (Zhou et al., 2024; ``Universal-NER/UniNER-7B-type``) for the entity Jaccard.

UniNER is a Llama-7B causal LM asked one entity type at a time in the conversation format its authors
publish on the model card:

    A virtual assistant answers questions from a user based on the provided text.
    USER: Text: {text}
    ASSISTANT: I’ve read this text.
    USER: What describes {entity type} in the text?
    ASSISTANT:

It answers (greedy decoding) a JSON list of strings, e.g. ``["Ubuntu", "apt"]``. A text's entity set is
the union over the queried types (``FactSettings.entity_types``) of the normalised strings; an answer that
is not a JSON list of strings (cut at ``max_new_tokens``, or free text) adds nothing and is counted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from graphctx.metrics.facts import normalise
from graphctx.metrics.factsumm import resolve_device
from graphctx.metrics.settings import FactSettings

PROMPT = (
    "A virtual assistant answers questions from a user based on the provided text.\n"
    "USER: Text: {text}\n"
    "ASSISTANT: I’ve read this text.\n"
    "USER: What describes {entity_type} in the text?\n"
    "ASSISTANT:"
)


def prompt(text: str, entity_type: str) -> str:
    """UniNER's published prompt for one text and entity type."""
    return PROMPT.format(text=text, entity_type=entity_type)


def parse_answer(answer: str) -> list[str] | None:
    """The entities of one UniNER answer (a JSON list of strings); None when it is not one."""
    try:
        value = json.loads(answer.strip())
    except json.JSONDecodeError:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return value


class UniNEREntities:
    """Entity sets of texts by UniversalNER (``settings.uniner_model``), greedy, batched, left-padded."""

    def __init__(self, settings: FactSettings, device: str | None = None) -> None:
        self.settings = settings
        self.device = resolve_device(device or settings.device)
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        self.tokenizer = AutoTokenizer.from_pretrained(settings.uniner_model, padding_side="left")
        if self.tokenizer.pad_token is None:  # Llama has none; padded positions are masked out
            self.tokenizer.pad_token = self.tokenizer.unk_token or self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(settings.uniner_model, dtype=dtype)
        self.model.to(self.device).eval()

    @torch.inference_mode()
    def answers(self, prompts: Sequence[str]) -> list[str]:
        """UniNER's greedy answer to each prompt (special tokens dropped, surrounding space stripped)."""
        answers: list[str] = []
        for start in range(0, len(prompts), self.settings.batch_size):
            batch = self.tokenizer(
                list(prompts[start : start + self.settings.batch_size]), return_tensors="pt", padding=True
            ).to(self.device)
            output = self.model.generate(
                **batch,
                do_sample=False,
                max_new_tokens=self.settings.max_new_tokens,
                pad_token_id=self.tokenizer.pad_token_id,
            )
            new = output[:, batch["input_ids"].shape[1] :]
            answers += [text.strip() for text in self.tokenizer.batch_decode(new, skip_special_tokens=True)]
        return answers

    def __call__(self, texts: Sequence[str]) -> tuple[list[set[str]], int]:
        """The entity strings of each text, united over the entity types (normalised by ``normalise``), and
        how many answers were not a JSON list of strings."""
        types = self.settings.entity_types
        answers = self.answers([prompt(text, kind) for text in texts for kind in types])
        result: list[set[str]] = []
        unparsed = 0
        for position in range(len(texts)):
            entities: set[str] = set()
            for answer in answers[position * len(types) : (position + 1) * len(types)]:
                parsed = parse_answer(answer)
                if parsed is None:
                    unparsed += 1
                    continue
                entities |= {normalise(item) for item in parsed}
            result.append(entities - {""})
        return result, unparsed
