"""Sentence embeddings from a sentence-transformers model folder, on plain ``transformers``.

Reads the folder's ``modules.json`` and runs its pipeline Transformer → Pooling → (Normalize), with the
numbers sentence-transformers' ``encode(..., normalize_embeddings=True)`` gives, without importing
sentence-transformers (whose package imports its trainers, and through them peft and bitsandbytes).

Pooling of the last hidden states ``h_1 .. h_T`` (``m_t`` = 1 for real tokens, 0 for padding):

* ``mean``: ``Σ_t m_t h_t / max(Σ_t m_t, 1e-9)``
* ``max``: ``max_t`` over the real tokens of ``h_t`` (per dimension)
* ``cls``: ``h_f``, ``f`` the first real token (the ``[CLS]`` token; left padding is skipped)
* ``lasttoken``: ``h_l``, ``l`` the last real token (decoder embedders; right or left padding)

Every sentence embedding is then L2-normalised, ``e / ‖e‖`` (a Normalize module is allowed, and is the
same step). Pooling and normalising run in float32 whatever the model's dtype.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from graphctx.errors import ConfigError

POOLING_MODES = ("cls", "mean", "max", "lasttoken")
# Old sentence-transformers configs name the pooling by flags, in this order of precedence.
LEGACY_POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
# sentence_bert_config.json keys read here; the others must hold sentence-transformers' text defaults.
TRANSFORMER_DEFAULTS = {
    "transformer_task": "feature-extraction",
    "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
    "module_output_name": "token_embeddings",
}
KWARGS_KEYS = {"model_args": "model", "model_kwargs": "model", "tokenizer_args": "tokenizer"}
KWARGS_KEYS |= {"processor_kwargs": "tokenizer", "config_args": "config", "config_kwargs": "config"}
# What a hub model needs: configs, tokenizer files, safetensors weights (not ONNX/OpenVINO/TF copies).
HUB_FILES = ["*.json", "*.txt", "*.model", "*.safetensors"]


def resolve_model_folder(name: str) -> Path:
    """``name`` itself when it is a folder, else the hub model's snapshot: from the local cache, or
    downloaded unless ``HF_HUB_OFFLINE`` is set; neither is a one-line error naming the setting."""
    if Path(name).is_dir():
        return Path(name)
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, allow_patterns=HUB_FILES))
    except (OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(
            f"retrieval.embedding_model={name!r} is neither a folder nor a loadable hub model ({reason})"
        ) from None


def _read_json(path: Path) -> Any:
    """The file's JSON, or {} when there is no such file."""
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: not valid JSON ({error})") from None


def read_pipeline(folder: Path) -> tuple[Path, Path | None]:
    """The Transformer and Pooling module folders of ``folder/modules.json`` (a Normalize may follow);
    any other layout is a one-line error naming the file and the module. A plain transformers folder (no
    ``modules.json``) is its own Transformer with no Pooling folder: mean pooling, as sentence-transformers
    builds for it."""
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return folder, None
    modules = _read_json(modules_file)
    for position, module in enumerate(modules):
        expected = ("Transformer", "Pooling", "Normalize")[position] if position < 3 else None
        if module["type"].rsplit(".", 1)[-1] != expected:
            raise ConfigError(
                f"{modules_file}: module {module.get('name', position)!r} ({module['type']}) is not "
                "supported; graphctx runs Transformer -> Pooling -> optional Normalize"
            )
    if len(modules) < 2:
        raise ConfigError(f"{modules_file}: needs a Transformer and a Pooling module")
    return folder / modules[0]["path"], folder / modules[1]["path"]


def read_pooling_mode(pooling_folder: Path | None) -> str:
    """The single pooling mode of a Pooling module's ``config.json`` (new or legacy keys); ``mean``
    without a Pooling module."""
    if pooling_folder is None:
        return "mean"
    config_file = pooling_folder / "config.json"
    config = _read_json(config_file)
    mode = config.get("pooling_mode")
    if mode is None:
        flagged = [name for key, name in LEGACY_POOLING_FLAGS.items() if config.get(key)]
        mode = flagged if flagged else "mean"
    if isinstance(mode, list) and len(mode) == 1:
        mode = mode[0]
    if mode not in POOLING_MODES:
        raise ConfigError(f"{config_file}: pooling {mode!r} is not supported (supported: {POOLING_MODES})")
    if config.get("include_prompt", True) is not True:
        raise ConfigError(f"{config_file}: include_prompt=false is not supported (prompts are in the text)")
    return mode


def read_transformer_config(folder: Path) -> dict[str, Any]:
    """``sentence_bert_config.json``: max_seq_length, do_lower_case and the model/tokenizer/config kwargs;
    a setting that would change the text pipeline is a one-line error."""
    config_file = folder / "sentence_bert_config.json"
    config = _read_json(config_file)
    read: dict[str, Any] = {"max_seq_length": None, "do_lower_case": False, "model": {}, "tokenizer": {}}
    read["config"] = {}
    for key, value in config.items():
        if key in ("max_seq_length", "do_lower_case"):
            read[key] = value
        elif key in KWARGS_KEYS:
            read[KWARGS_KEYS[key]].update({k: v for k, v in value.items() if k != "trust_remote_code"})
        elif key not in TRANSFORMER_DEFAULTS or TRANSFORMER_DEFAULTS[key] != value:
            raise ConfigError(f"{config_file}: {key}={value!r} is not supported")
    return read


def pool(hidden: Tensor, mask: Tensor, mode: str) -> Tensor:
    """Sentence embeddings [batch, d] from token states [batch, tokens, d] and the attention mask.

    Examples:
        >>> hidden = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]])
        >>> mask = torch.tensor([[1, 1, 0]])
        >>> [pool(hidden, mask, mode).tolist() for mode in ("mean", "max", "cls", "lasttoken")]
        [[[2.0, 3.0]], [[3.0, 4.0]], [[1.0, 2.0]], [[3.0, 4.0]]]
    """
    hidden = hidden.float()
    if mode == "mean":
        weights = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
    if mode == "max":
        return hidden.masked_fill(mask.unsqueeze(-1) == 0, float("-inf")).max(dim=1).values
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    if mode == "cls":
        return hidden[rows, mask.int().argmax(dim=1)]
    tokens = mask.shape[1]
    return hidden[rows, tokens - 1 - mask.int().flip(1).argmax(dim=1)]  # lasttoken


class SentenceEncoder(torch.nn.Module):
    """A sentence-transformers model (Transformer → Pooling → optional Normalize) on ``transformers``.

    Examples:
        >>> from graphctx.retrieval.embeddings import PACKAGED_MINILM, resolve_model_path
        >>> encoder = SentenceEncoder.load(resolve_model_path(PACKAGED_MINILM), max_seq_length=64)
        >>> encoder.pooling, encoder.encode(["How do I stake ADA?"], batch_size=8).shape
        ('mean', torch.Size([1, 384]))
    """

    def __init__(self, model: torch.nn.Module, tokenizer: Any, pooling: str, max_length: int) -> None:
        super().__init__()
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.max_length = max_length

    @classmethod
    def load(
        cls,
        name: str,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        max_seq_length: int | None = None,
    ) -> SentenceEncoder:
        """The model folder or hub id ``name`` in ``dtype`` on ``device``; ``max_seq_length`` replaces the
        model's token limit (sentence_bert_config's, else the tokenizer's capped by the positions)."""
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        folder = resolve_model_folder(name)
        transformer_folder, pooling_folder = read_pipeline(folder)
        pooling = read_pooling_mode(pooling_folder)
        settings = read_transformer_config(transformer_folder)
        prompts = _read_json(folder / "config_sentence_transformers.json")
        if prompts.get("default_prompt_name"):
            raise ConfigError(
                f"{folder / 'config_sentence_transformers.json'}: default_prompt_name is not supported "
                "(set retrieval.instruction instead)"
            )
        config = AutoConfig.from_pretrained(transformer_folder, **settings["config"])
        if getattr(config, "is_encoder_decoder", False):
            raise ConfigError(f"{transformer_folder}: encoder-decoder {config.model_type} is not supported")
        if hasattr(config, "use_cache"):
            config.use_cache = False
        tokenizer_kwargs = dict(settings["tokenizer"])
        if settings["max_seq_length"] is not None:
            tokenizer_kwargs.setdefault("model_max_length", settings["max_seq_length"])
        tokenizer = AutoTokenizer.from_pretrained(transformer_folder, **tokenizer_kwargs)
        max_length = tokenizer.model_max_length
        positions = getattr(config, "max_position_embeddings", -1)
        if "model_max_length" not in tokenizer_kwargs and positions != -1:
            max_length = min(max_length, positions)
        if settings["do_lower_case"]:
            lowercase(tokenizer)
        model = AutoModel.from_pretrained(
            transformer_folder, config=config, **{**settings["model"], "dtype": dtype}
        )
        encoder = cls(model, tokenizer, pooling, max_seq_length or max_length)
        return encoder.to(device)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def forward(self, features: dict[str, Tensor]) -> Tensor:
        """L2-normalised float32 sentence embeddings [batch, d] of tokenised texts."""
        hidden = self.model(**features).last_hidden_state
        return F.normalize(pool(hidden, features["attention_mask"], self.pooling), p=2, dim=-1)

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], batch_size: int, show_progress_bar: bool = False) -> Tensor:
        """Embeddings [len(texts), d] on the model's device, in the order of ``texts``.

        Texts are batched longest first (by characters, in sentence-transformers' order), so a batch pads
        little. Right padding (encoders) is masked, so the result does not depend on the batching; left
        padding shifts the real tokens' absolute positions with the batch's longest text, in
        sentence-transformers too.
        """
        order = np.argsort([-len(text) for text in texts]).tolist()
        chunks = []
        for start in tqdm(range(0, len(texts), batch_size), desc="Embedding", disable=not show_progress_bar):
            batch = [texts[row] for row in order[start : start + batch_size]]
            features = self.tokenizer(
                batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            )
            chunks.append(self({key: value.to(self.device) for key, value in features.items()}))
        if not chunks:
            return torch.empty(0, self.model.config.hidden_size, device=self.device)
        embeddings = torch.cat(chunks)
        return embeddings[torch.tensor(order, device=self.device).argsort()]


def lowercase(tokenizer: Any) -> None:
    """``do_lower_case``: a Lowercase normaliser before a fast tokenizer's own, unless it has one."""
    from tokenizers.normalizers import Lowercase
    from tokenizers.normalizers import Sequence as NormalizerSequence

    normalizer = tokenizer.backend_tokenizer.normalizer
    parts = list(normalizer) if isinstance(normalizer, NormalizerSequence) else [normalizer]
    if any(isinstance(part, Lowercase) for part in parts):
        return
    tokenizer.backend_tokenizer.normalizer = NormalizerSequence(
        [Lowercase(), *(part for part in parts if part is not None)]
    )
