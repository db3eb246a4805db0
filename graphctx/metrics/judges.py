"""Entailment judges for AutoAIS: the TRUE T5 NLI model, or a causal LM prompted to answer 1/0.

Both read the input of Bohnet et al. (2022) / Honovich et al. (2022), ``premise: {p} hypothesis: {h}``,
and return, per pair, the hard judgement (entailed or not) and a soft score P('1').
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

import torch
from torch import Tensor
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from graphctx.errors import ConfigError
from graphctx.metrics.choice import choose_judge
from graphctx.metrics.lexical_judge import LexicalJudge
from graphctx.metrics.settings import AutoAISSettings
from graphctx.model.loading import resolve_source
from graphctx.model.settings import ModelSpec

CAUSAL_LM_INSTRUCTION = (
    "Decide whether the premise entails the hypothesis. Reply with 1 if everything the hypothesis states "
    "is supported by the premise, otherwise reply with 0. Reply with the single digit only."
)


def nli_input(premise: str, hypothesis: str) -> str:
    """The TRUE / AutoAIS model input: ``premise: {premise} hypothesis: {hypothesis}``."""
    return f"premise: {premise} hypothesis: {hypothesis}"


class EntailmentJudge(Protocol):
    """What AutoAIS needs from a judge."""

    label: str
    """Empty for the paper's judge; otherwise appended to every output key (see :func:`choose_judge`)."""
    max_input_tokens: int
    """Longest input the judge accepts; longer inputs are reported, never cut."""

    def input_lengths(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[int]:
        """Tokens each judge input takes."""
        ...

    def judge(self, premises: Sequence[str], hypotheses: Sequence[str]) -> tuple[Tensor, Tensor]:
        """Per pair: ``entailed`` (bool) and the soft score P('1') (float), both on CPU."""
        ...


def _resolve_max_tokens(model: PreTrainedModel, max_input_tokens: int | None) -> int:
    """The chosen limit, else the loaded model's ``max_position_embeddings`` (never the tokenizer's
    ``model_max_length``, a training length)."""
    if max_input_tokens:
        return max_input_tokens
    if limit := getattr(model.config, "max_position_embeddings", None):
        return int(limit)
    raise ConfigError(
        "evaluation.metrics.autoais.max_input_tokens: the judge declares no input limit; set it explicitly"
    )


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Row indices in batches of similar length, longest first, so little compute goes to padding."""
    order = sorted(range(len(lengths)), key=lambda row: -lengths[row])
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def _label_token_ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """Token ids of the label ``text`` without special tokens (T5: ``1`` → [▁1])."""
    ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    if not ids or tokenizer.decode(ids).strip() != text:
        raise ValueError(f"AutoAIS judge tokenizer cannot encode the label {text!r} (got {ids})")
    return ids


class T5NliJudge:
    """The AutoAIS reference judge: a seq2seq NLI model such as ``google/t5_xxl_true_nli_mixture``.

    Hard judgement: greedy generation decodes to exactly ``1``. Soft score: P(label tokens of ``1``) under
    teacher forcing, i.e. p('1') at the first decoder step for T5's single-token ``▁1``.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_input_tokens: int | None = None,
        batch_size: int = 8,
        max_new_tokens: int = 10,
        label: str = "",
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.label = label
        self.max_input_tokens = _resolve_max_tokens(model, max_input_tokens)
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.entailed_ids = torch.tensor(_label_token_ids(tokenizer, "1"))

    def texts(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[str]:
        """The exact model inputs, one ``premise: … hypothesis: …`` string per pair."""
        return [nli_input(p, h) for p, h in zip(premises, hypotheses, strict=True)]

    def input_lengths(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[int]:
        return [
            len(ids) for ids in self.tokenizer(self.texts(premises, hypotheses), verbose=False)["input_ids"]
        ]

    @torch.inference_mode()
    def judge(self, premises: Sequence[str], hypotheses: Sequence[str]) -> tuple[Tensor, Tensor]:
        encoded = self.tokenizer(self.texts(premises, hypotheses), verbose=False)["input_ids"]
        entailed = torch.zeros(len(encoded), dtype=torch.bool)
        soft = torch.zeros(len(encoded))
        for rows in length_sorted_batches([len(ids) for ids in encoded], self.batch_size):
            batch = self.tokenizer.pad({"input_ids": [encoded[i] for i in rows]}, return_tensors="pt")
            batch = batch.to(self.model.device)
            generated = self.model.generate(
                **batch, max_new_tokens=self.max_new_tokens, do_sample=False, num_beams=1
            )
            decoded = self.tokenizer.batch_decode(generated, skip_special_tokens=True)
            entailed[rows] = torch.tensor([text.strip() == "1" for text in decoded])
            labels = self.entailed_ids.to(self.model.device).repeat(len(rows), 1)
            log_probs = self.model(**batch, labels=labels).logits.float().log_softmax(-1)
            soft[rows] = log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1).sum(-1).exp().cpu()
        return entailed, soft


class CausalLMJudge:
    """A causal LM (e.g. SmolLM2-Instruct) asked the AutoAIS question; a stand-in, labelled as such.

    The user turn is an instruction followed by the same ``premise: … hypothesis: …`` input; the chat
    template (when the tokenizer has one) opens the assistant turn. Soft score:
    p1 = softmax(logit('1'), logit('0'))[0] at the reply's first digit; entailed iff p1 > 0.5.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_input_tokens: int | None = None,
        batch_size: int = 8,
        label: str = "causal-lm",
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.label = label
        self.max_input_tokens = _resolve_max_tokens(model, max_input_tokens)
        self.batch_size = batch_size
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def prompt(self, premise: str, hypothesis: str) -> str:
        """The judge prompt text, ending where the reply's digit starts."""
        user = f"{CAUSAL_LM_INSTRUCTION}\n\n{nli_input(premise, hypothesis)}"
        if self.tokenizer.chat_template:
            messages = [{"role": "user", "content": user}]
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return f"{user}\nAnswer:"

    def _prefix_and_label_ids(self, prompt: str) -> tuple[list[int], int, int]:
        """Ids of the prompt shared by both replies, and the ids of the final '1' and '0' tokens."""
        # A chat template writes its own special tokens; a plain prompt gets the tokenizer's (e.g. BOS).
        plain = not self.tokenizer.chat_template
        separator = " " if plain else ""
        yes = self.tokenizer(prompt + separator + "1", add_special_tokens=plain, verbose=False)["input_ids"]
        no = self.tokenizer(prompt + separator + "0", add_special_tokens=plain, verbose=False)["input_ids"]
        if len(yes) != len(no) or yes[:-1] != no[:-1]:
            raise ValueError(
                "AutoAIS causal-LM judge: the replies '1' and '0' must differ in one final token"
            )
        return yes[:-1], yes[-1], no[-1]

    def input_lengths(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[int]:
        prompts = [self.prompt(p, h) for p, h in zip(premises, hypotheses, strict=True)]
        return [len(self._prefix_and_label_ids(prompt)[0]) for prompt in prompts]

    @torch.inference_mode()
    def judge(self, premises: Sequence[str], hypotheses: Sequence[str]) -> tuple[Tensor, Tensor]:
        encoded = [
            self._prefix_and_label_ids(self.prompt(p, h)) for p, h in zip(premises, hypotheses, strict=True)
        ]
        soft = torch.zeros(len(encoded))
        for rows in length_sorted_batches([len(ids) for ids, _, _ in encoded], self.batch_size):
            chunk = [encoded[i] for i in rows]
            width = max(len(ids) for ids, _, _ in chunk)
            input_ids = torch.tensor([[self.pad_id] * (width - len(ids)) + ids for ids, _, _ in chunk])
            attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids, _, _ in chunk])
            position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
            device = self.model.device
            logits = (
                self.model(
                    input_ids=input_ids.to(device),
                    attention_mask=attention_mask.to(device),
                    position_ids=position_ids.to(device),
                    logits_to_keep=1,
                )
                .logits[:, -1]
                .float()
            )
            label_ids = torch.tensor([[yes, no] for _, yes, no in chunk], device=device)
            soft[rows] = logits.gather(-1, label_ids).softmax(-1)[:, 0].cpu()
        return soft > 0.5, soft


def build_judge(
    settings: AutoAISSettings, cache_dir: str | None = None, device: str | None = None
) -> EntailmentJudge:
    """The judge named by ``settings.model`` (see :func:`choose_judge`) on ``device`` (default:
    ``settings.device``, else CUDA when available): seq2seq → :class:`T5NliJudge`, else
    :class:`CausalLMJudge`.

    ``settings.model`` is read like ``model.spec.source`` (an id, a folder, a ``.gguf`` file or
    ``smollm2-gguf``, the packaged SmolLM2 converted once into ``cache_dir``); ``lexical-containment`` is
    :class:`~graphctx.metrics.lexical_judge.LexicalJudge` (no model).
    """
    choice = choose_judge(settings)
    if choice.protocol == "lexical":
        return LexicalJudge(settings.hypothesis_template, label=choice.label)
    source = resolve_source(ModelSpec(source=settings.model, cache_dir=cache_dir))
    device = device or settings.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(source)
    if AutoConfig.from_pretrained(source).is_encoder_decoder:
        model = AutoModelForSeq2SeqLM.from_pretrained(source, dtype=dtype).to(device)
        return T5NliJudge(
            model,
            tokenizer,
            choice.max_input_tokens,
            settings.batch_size,
            settings.max_new_tokens,
            label=choice.label,
        )
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype).to(device)
    return CausalLMJudge(model, tokenizer, choice.max_input_tokens, settings.batch_size, label=choice.label)
