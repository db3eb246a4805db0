"""Triplet extraction by prompting a causal LM (the answer model itself), with a forgiving parser.

The prompt (``LLM_TRIPLET_PROMPT``) asks for one ``(subject | relation | object)`` per line. Small models
drift from any format, so :func:`parse_llm_triplets` also accepts JSON lists/objects, numbered or bulleted
lines, ``;``/``,``/``->`` separators, quotes, and REBEL's linearised form; everything else is ignored.

As in the paper, the LM is by default the generation model itself (``knowledge.llm_model: ""``): the entry
point that loaded it lends it as a :class:`GenerationModel`, and no second copy is loaded.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import torch

from graphctx.decoding import Backend, greedy_new_tokens, padded_greedy
from graphctx.knowledge.rebel import parse_rebel_output
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.text import strip_code_blocks
from graphctx.knowledge.triplets import Triplet

LLM_TRIPLET_PROMPT = (
    "Extract the facts stated in the text below as triplets.\n"
    "Write one triplet per line in the form (subject | relation | object).\n"
    "Subjects and objects are short names (software, packages, commands, concepts); the relation is a "
    "short verb phrase. Write nothing else.\n\n"
    "Text:\n{text}\n\nTriplets:\n"
)
"""The instruction sent to the LM; ``{text}`` is one retrieved question/answer pair (code removed)."""

MAX_PART_CHARS = 100
"""Longer heads, relations or tails are sentences, not entities: such lines are dropped."""

_BULLET = re.compile(r"^\s*(?:[-*•>]+|\(?\d+[.):]|triplet\s*\d*\s*:)\s*", re.IGNORECASE)
_SEPARATORS = (re.compile(r"\s*\|\s*"), re.compile(r"\s*;\s*"), re.compile(r"\s*(?:->|→|=>)\s*"))
_LABELLED = re.compile(
    r"(?:subject|head)\s*[:=]\s*(?P<head>.+?)\s*[,;|]\s*(?:relation|predicate|verb)\s*[:=]\s*(?P<rel>.+?)"
    r"\s*[,;|]\s*(?:object|tail)\s*[:=]\s*(?P<tail>.+)",
    re.IGNORECASE,
)
_STRIP_CHARS = " \t\"'`()[]{}<>.,"
_KEYS = {
    "head": ("head", "subject", "s"),
    "relation": ("relation", "predicate", "r", "p"),
    "tail": ("tail", "object", "o"),
}


def _clean(part: str) -> str:
    return " ".join(part.strip(_STRIP_CHARS).split())


def _accept(parts: Sequence[Any]) -> tuple[str, str, str] | None:
    if len(parts) != 3 or not all(isinstance(p, str) for p in parts):
        return None
    head, relation, tail = (_clean(p) for p in parts)
    if head and relation and tail and max(len(head), len(relation), len(tail)) <= MAX_PART_CHARS:
        return head, relation, tail
    return None


def _from_json(value: Any) -> list[tuple[str, str, str]]:
    items = value if isinstance(value, list) else [value]
    found = []
    for item in items:
        if isinstance(item, dict):
            lowered = {str(k).lower(): v for k, v in item.items()}
            parts = [next((lowered[k] for k in keys if k in lowered), None) for keys in _KEYS.values()]
            triplet = _accept(parts)
        else:
            triplet = _accept(item) if isinstance(item, list | tuple) else None
        if triplet:
            found.append(triplet)
    return found


def _from_line(line: str) -> tuple[str, str, str] | None:
    line = _BULLET.sub("", line).strip()
    labelled = _LABELLED.search(line)
    if labelled:
        return _accept([labelled["head"], labelled["rel"], labelled["tail"]])
    line = line.strip(" \t.")
    if line.startswith(("(", "[")) and line.endswith((")", "]")):
        line = line[1:-1]
    for separator in _SEPARATORS:
        parts = separator.split(line)
        if len(parts) == 3:
            return _accept(parts)
    parts = [p for p in re.split(r"\s*,\s*", line) if p]
    return _accept(parts) if len(parts) == 3 else None


def parse_llm_triplets(text: str) -> list[tuple[str, str, str]]:
    """Every well-formed triplet in an LM reply, in order, duplicates removed (see module docstring)."""
    if "<triplet>" in text:
        return parse_rebel_output(text)
    found: list[tuple[str, str, str]] = []
    start, end = text.find("["), text.rfind("]")
    brace_start, brace_end = text.find("{"), text.rfind("}")
    for begin, finish in ((start, end), (brace_start, brace_end)):
        if 0 <= begin < finish:
            try:
                found = _from_json(json.loads(text[begin : finish + 1]))
            except json.JSONDecodeError:
                continue
            if found:
                break
    if not found:
        for line in text.splitlines():
            if found and re.match(r"\s*(text|question|answer)\s*:", line, re.IGNORECASE):
                break  # the model started a new example of its own
            triplet = _from_line(line)
            if triplet:
                found.append(triplet)
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class GenerationModel:
    """The generation model an entry point has already loaded, lent to the ``llm`` extractor.

    ``session`` is entered around every extraction pass and must leave the model as it found it; the
    validation callback uses it to run the training model in eval mode, SDPA attention, without its adapter.
    ``backend``: how the extractor decodes with it (``generation.backend``, :mod:`graphctx.decoding`).
    ``source_identity``: what the model's source is wherever it lies, as the lender knows it
    (:func:`graphctx.model_use.model_identity` of ``model.spec.source``: a packaged model by its package's
    version, a folder by its files), never the path the weights were read from.
    """

    model: Any
    tokenizer: Any
    session: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext
    backend: Backend = "generate"
    source_identity: Any = field(kw_only=True)

    @property
    def identity(self) -> str:
        """Source identity, config (quantisation included) and dtype of the model: what its triplets depend
        on (a cache key part, the same wherever the model's folder, the cache or the environment lies)."""
        config = {k: v for k, v in self.model.config.to_dict().items() if k != "_name_or_path"}
        return json.dumps([self.source_identity, config, str(self.model.dtype)], sort_keys=True, default=str)


class LLMExtractor:
    """Prompt any transformers causal LM for triplets, greedy, decoded by ``backend``
    (:mod:`graphctx.decoding`: left-padded batches of ``batch_size``, or continuous batching).

    Neither the model nor the tokenizer is changed, so the generation model can be shared: the model must
    already be in eval mode (``from_pretrained`` models are), or be put there by ``session``.
    ``generate_kwargs`` go to ``model.generate`` as for REBEL (e.g. constrained decoding; ``generate`` only).
    """

    name = "llm"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_new_tokens: int = 128,
        batch_size: int = 8,
        session: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
        generate_kwargs: dict[str, Any] | None = None,
        backend: Backend = "generate",
    ) -> None:
        if generate_kwargs and backend != "generate":
            raise ValueError(f"LLMExtractor: generate_kwargs need backend 'generate', not {backend!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.session = session
        self.generate_kwargs = dict(generate_kwargs or {})
        self.backend = backend
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else tokenizer.eos_token_id
        eos = model.generation_config.eos_token_id  # what ``generate`` stops at when given none
        eos = [eos] if isinstance(eos, int) else list(eos or [tokenizer.eos_token_id])
        self.eos_ids = [token for token in eos if token is not None]

    @classmethod
    def from_settings(
        cls, settings: KnowledgeSettings, generation_model: GenerationModel | None = None
    ) -> LLMExtractor:
        """The generation model when ``settings.llm_model`` is ``""``, else that model loaded onto
        ``settings.device`` (bfloat16 on CUDA, float32 on the CPU; optionally from a GGUF file in it)."""
        options = {"max_new_tokens": settings.llm_max_new_tokens, "batch_size": settings.batch_size}
        if not settings.llm_model:
            if generation_model is None:
                raise ValueError(
                    'knowledge.llm_model: "" means the generation model, which this caller does not pass; '
                    "name a causal LM id or folder instead"
                )
            lent = generation_model
            return cls(lent.model, lent.tokenizer, session=lent.session, backend=lent.backend, **options)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = torch.device(settings.device)
        gguf = {"gguf_file": settings.llm_gguf_file} if settings.llm_gguf_file else {}
        tokenizer = AutoTokenizer.from_pretrained(settings.llm_model, **gguf)
        model = AutoModelForCausalLM.from_pretrained(
            settings.llm_model,
            dtype=torch.bfloat16 if device.type == "cuda" else torch.float32,
            device_map={"": device},
            **gguf,
        )
        return cls(model.eval(), tokenizer, **options)

    def prompt(self, text: str) -> str:
        """The full model input for one text: the instruction, wrapped in the chat template if any."""
        message = LLM_TRIPLET_PROMPT.format(text=strip_code_blocks(text).strip())
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=False
            )
        return message

    def _ids(self, text: str) -> list[int]:
        # A chat template already writes BOS and role markers; a raw prompt needs the tokenizer's.
        templated = bool(getattr(self.tokenizer, "chat_template", None))
        return self.tokenizer(self.prompt(text), add_special_tokens=not templated)["input_ids"]

    @torch.no_grad()  # not inference_mode: a shared training model must stay usable for training
    def generate(self, texts: Sequence[str]) -> list[str]:
        """The LM's raw replies, one per text."""
        with self.session():
            prompts = [self._ids(text) for text in texts]
            if self.generate_kwargs:
                new_tokens = [
                    ids
                    for start in range(0, len(prompts), self.batch_size)
                    for ids in padded_greedy(
                        self.model,
                        prompts[start : start + self.batch_size],
                        self.max_new_tokens,
                        self.eos_ids,
                        self.pad_id,
                        **self.generate_kwargs,
                    )
                ]
            else:
                new_tokens = greedy_new_tokens(
                    self.model,
                    prompts,
                    backend=self.backend,
                    max_new_tokens=self.max_new_tokens,
                    eos_ids=self.eos_ids,
                    pad_id=self.pad_id,
                    batch_size=self.batch_size,
                )
        return self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)

    def extract(self, texts: Sequence[str]) -> list[list[Triplet]]:
        """One list of triplets per text, parsed forgivingly from the LM's reply."""
        return [
            [Triplet(h, r, t, self.name) for h, r, t in parse_llm_triplets(reply)]
            for reply in self.generate(texts)
        ]
