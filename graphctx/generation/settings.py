"""Settings of answer generation (the ``generation:`` section of a config): batched greedy decoding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from graphctx.checks import AT_LEAST_ONE, Range, check_own_fields
from graphctx.decoding import Backend
from graphctx.errors import ConfigError


@dataclass
class GenerationSettings:
    """Batched greedy decoding of answers."""

    RANGES: ClassVar[dict[str, Range]] = {
        "max_new_tokens": AT_LEAST_ONE,
        "batch_size": AT_LEAST_ONE,
        "max_prompt_tokens": AT_LEAST_ONE,
        "cache_bucket_tokens": AT_LEAST_ONE,
    }

    def __post_init__(self) -> None:
        check_own_fields(self)
        if self.backend != "generate" and self.static_cache:
            raise ConfigError(
                f"generation: static_cache needs backend: generate ({self.backend} keeps its own cache)"
            )

    max_new_tokens: int = 128
    """Most tokens generated per answer."""
    batch_size: int = 8
    """Prompts decoded together, longest first, so a batch holds prompts of similar length. CPU,
    tiny.yaml's model, 32 real cardano prompts of 238-1,471 tokens, 96 new tokens: batches of 8 took 896 s,
    one batch of 32 was not done after 1,410 s (it pads every prompt to the longest;
    ``benchmarks/generate_batch_size.py``, 2 cores under load ~15). H200 with a 7B model: 64-128."""
    max_prompt_tokens: int = 1536
    """Prompts longer than this drop knowledge sentences from the end, then pairs from the lowest rank;
    never the question or the top pair (when those alone are longer, the prompt is kept over the limit and
    its prediction is flagged ``prompt_over_limit``)."""
    base_weights: Literal["released", "trained"] = "released"
    """What the base-model rows (ZeroShot, the [w/o INST] rows) and the LLM triplet extractor decode in
    evaluate.py: ``released``, the checkpoint as published, unquantised, in ``dtype`` (Llama-2 as released);
    ``trained``, the weights the adapter was trained against (the NF4 base dequantised). The fine-tuned rows
    always decode the trained weights + adapter; the validation callback decodes the training model."""
    merge_adapter: bool = True
    """Both paths decode with the weights the adapter was trained against, as the validation callback does
    (the 4-bit NF4 base under QLoRA). True: those weights are dequantised once to ``dtype`` and the adapter is
    merged into them, W + (alpha/r)·B·A (several times faster, same model up to ``dtype`` rounding); false:
    the 4-bit base with the adapter applied on the fly (see ``base_weights`` for the base-model rows)."""
    dtype: Literal["auto", "fastest", "bfloat16", "float16", "float32"] = "auto"
    """With ``merge_adapter``: the dtype of the merged model (the dequantised NF4 weights, or the
    ``compute_dtype`` weights of plain LoRA, are cast to it before merging), and of the released base
    weights; ``auto``: bfloat16 on CUDA, float32 on the CPU; ``fastest``: bfloat16 on CUDA and on a CPU with
    bfloat16 instructions (AVX512-BF16 or AMX, read at run time), else float32. On the CPU bfloat16 changes
    the greedy tokens of many rows (rounding), so ``auto`` keeps float32 there and ``fastest`` is asked for
    (tiny.yaml; ``benchmarks/generation_engines.py`` counts the rows that differ)."""
    static_cache: bool = False
    """CUDA only: static KV cache and the decoding step compiled into CUDA graphs. Prompts are padded to
    multiples of ``cache_bucket_tokens`` and batches to ``batch_size`` so few shapes compile (each costs
    tens of seconds once); pays for long evaluations."""
    cache_bucket_tokens: int = 256
    """With ``static_cache``: prompt widths are rounded up to a multiple of this."""
    device: str | None = None
    """Torch device of the generating model; null: ``cuda`` when available, else ``cpu``."""
    citations: bool = False
    """ALCE (Gao et al., 2023) sentence citations, an extension beyond the paper: a prompt with a context
    numbers its passages (the pairs, then the knowledge sentences) as ``Document [n](Title: …): …`` under
    ALCE's instruction to cite them as ``[n]`` after each sentence; the prediction lines gain ``citations``
    and ``passages``, which the ``alce_citations`` metric scores. False: the paper's prompts."""
    backend: Backend = "generate"
    """How every LLM in the run decodes (the answers, UniversalNER's entity lists, the LLM triplet
    extractor): ``generate``, left-padded batches of ``batch_size`` (the extractor's and UniNER's own
    ``batch_size``); ``continuous``, transformers' continuous batching (``generate_batch``: a paged KV cache,
    no pads, a finished answer's slot refilled at once) over each batch of ``batch_size`` answers and over
    all of UniNER's and the extractor's prompts. Same greedy tokens up to rounding
    (``benchmarks/generate_throughput.py`` measures both; the validation callback always uses
    ``generate``)."""
