"""UniversalNER entity sets (Zhou et al., 2024; ``Universal-NER/UniNER-7B-type``) for the entity Jaccard.

Built as the authors' code runs it (universal-ner ``src/utils.py`` ``preprocess_instance`` with the
``ie_as_qa`` conversation of ``src/conversation.py``: separator ``" "``, second separator ``"</s>"``).
Text ``T`` and entity type ``X`` render as exactly

    A virtual assistant answers questions from a user based on the provided text. USER: Text: T
    ASSISTANT: I've read this text.</s>USER: What describes X in the text? ASSISTANT:

(one line), and greedy decoding stops at ``</s>``. The answer is cut as their ``get_response`` (the text
after the last ``ASSISTANT:``, stripped) and parsed as their ``src/eval/evaluate.py`` ``parser``: the
``[...]`` at the start of the answer (``re.match``, the shortest) as JSON, each entity normalised as
SQuAD's ``normalize_answer`` (lower case; punctuation deleted; articles ``a an the`` removed; whitespace
collapsed; no stemming), duplicates dropped in order; no leading ``[...]``, bad JSON or a non-string item:
no entity (graphctx counts those answers as unparsed). A text's entity set is the union over the queried
types (``FactSettings.entity_types``, graphctx's choice: the paper names none), less the empty string (an
entity that normalises to nothing, e.g. ``"the"``; graphctx's choice: the authors' F1 would keep it).

Read at universal-ner/universal-ner commit 844e0e12262f2606d1d61ed5e9a89ce06ea6b5e3; the tests compare with
outputs of that commit's ``parser`` and ``preprocess_instance``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from graphctx.decoding import Backend, greedy_new_tokens
from graphctx.metrics.factsumm import resolve_device
from graphctx.metrics.settings import FactSettings
from graphctx.metrics.squad import normalize_answer

END_OF_TURN = "</s>"
PROMPT = (
    "A virtual assistant answers questions from a user based on the provided text."
    " USER: Text: {text} ASSISTANT: I've read this text."
    + END_OF_TURN
    + "USER: What describes {entity_type} in the text? ASSISTANT:"
)
_LEADING_LIST = re.compile(r"\[(.*?)\]")


def prompt(text: str, entity_type: str) -> str:
    """The ``ie_as_qa`` prompt of UniNER's authors for one text and entity type."""
    return PROMPT.format(text=text, entity_type=entity_type)


def parse_answer(answer: str) -> list[str] | None:
    """The authors' parsed, normalised entities of one answer (duplicates dropped, order kept); None when
    the answer does not start with a JSON list of strings (the authors take no entity then)."""
    match = _LEADING_LIST.match(answer.split("ASSISTANT:")[-1].strip())
    if match is None:
        return None
    try:
        value = json.loads(match.group())
    except json.JSONDecodeError:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    entities: list[str] = []
    for item in value:
        entity = normalize_answer(item)
        if entity not in entities:
            entities.append(entity)
    return entities


class UniNEREntities:
    """Entity sets of texts by UniversalNER (``settings.uniner_model``), greedy, decoded by ``backend``
    (``generation.backend``: padded batches or continuous batching, :mod:`graphctx.decoding`)."""

    def __init__(
        self, settings: FactSettings, device: str | None = None, backend: Backend = "generate"
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.device = resolve_device(device or settings.device)
        dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        self.tokenizer = AutoTokenizer.from_pretrained(settings.uniner_model)
        pad = self.tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else self.tokenizer.unk_token_id  # masked out: any id serves
        self.end_of_turn_id = self.tokenizer.convert_tokens_to_ids(END_OF_TURN)
        self.model = AutoModelForCausalLM.from_pretrained(settings.uniner_model, dtype=dtype)
        self.model.to(self.device).eval()

    @torch.inference_mode()
    def answers(self, prompts: Sequence[str], batch_size: int | None = None) -> list[str]:
        """UniNER's greedy answer to each prompt (special tokens dropped, surrounding space stripped),
        ``batch_size`` (default ``settings.batch_size``; 1: unpadded) prompts at a time with ``generate``."""
        new = greedy_new_tokens(
            self.model,
            self.tokenizer(list(prompts))["input_ids"],
            backend=self.backend,
            max_new_tokens=self.settings.max_new_tokens,
            eos_ids=[self.end_of_turn_id],
            pad_id=self.pad_id,
            batch_size=batch_size or self.settings.batch_size,
        )
        return [text.strip() for text in self.tokenizer.batch_decode(new, skip_special_tokens=True)]

    def __call__(self, texts: Sequence[str], batch_size: int | None = None) -> tuple[list[set[str]], int]:
        """The entity strings of each text, united over the entity types (normalised by
        ``normalize_answer``), and how many answers did not start with a JSON list of strings."""
        types = self.settings.entity_types
        answers = self.answers([prompt(text, kind) for text in texts for kind in types], batch_size)
        result: list[set[str]] = []
        unparsed = 0
        for position in range(len(texts)):
            entities: set[str] = set()
            for answer in answers[position * len(types) : (position + 1) * len(types)]:
                parsed = parse_answer(answer)
                if parsed is None:
                    unparsed += 1
                    continue
                entities |= set(parsed)
            result.append(entities - {""})
        return result, unparsed
