"""Device memory per rank that train.py and evaluate.py need, estimated without loading any weights.

Parameter counts come from each model's ``config.json`` (read from its folder or the HF cache; for the
packaged and the paper's Hub ids, the published config values in
:data:`~graphctx.stack.model_shapes.KNOWN_CONFIGS`): the model is built on the meta device (no memory)
and its tensors counted (:func:`~graphctx.stack.model_shapes.shape_of`; for the known ids, counted once
into :data:`~graphctx.stack.shape_table.KNOWN_SHAPES`). Bytes per parameter, on CUDA
(``auto`` dtypes resolve to bfloat16 there): NF4 0.5 + the quant state (double quantisation: an 8-bit
absmax per block of 64 plus a float32 scale per 256 blocks, 1/64 + 4/16384 byte; else a float32 absmax
per 64, 4/64 byte) for the blocks' linear weights; bfloat16 2, float32 4. On top:

* KV cache of decoding: ``layers · 2 · kv_heads · head_dim · tokens · batch · 2`` bytes (bfloat16);
* prefill of decoding, the forward pass over a batch of whole prompts: one block's activations at their
  widest, ``h + max(3·h + 2·kv, h + 3·i)`` bfloat16 values per prompt token (the residual stream beside
  either the attention's normed input, query, keys/values and output, or the feed-forward's normed
  input, gate, up and their product), plus the last position's float32 logits (``batch · vocab · 4``:
  ``generate`` computes the logits of the last position only). Attention scores are not counted: SDPA's
  flash and memory-efficient kernels on CUDA never hold the ``T × T`` matrix;
* training: LoRA weights, gradients and AdamW's two moments in float32 (16 bytes per LoRA parameter; 8-bit
  paged AdamW: 10), and activations per token per decoder block of ``13·h + 2·kv + 5·i`` bfloat16 values
  (h the width, kv the key/value width, i the feed-forward width: norms, projections, the adapters'
  dropout inputs and SwiGLU's four ``i``-wide tensors kept for the backward pass); a checkpointed block
  keeps only its input (``h``), and one block's activations live while it recomputes; the loss chunk's
  float32 logits twice (value and gradient); on rank 0 the validation callback's KV cache and scorers;
* decoding: every row counted at ``max_prompt_tokens + max_new_tokens`` (an upper bound: batches are
  sorted by length, so most are shorter).

Not counted: the CUDA context and allocator fragmentation (about 0.5-1 GiB). Evaluation stages follow
the config's metrics (:mod:`graphctx.metrics.registry`), metric by metric: one stage's models at a time,
the peak is the largest.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from graphctx.errors import ConfigError
from graphctx.knowledge.extractors import selected_extractors
from graphctx.model.settings import LEXICAL_JUDGE, TinyLlamaSettings
from graphctx.pipeline.run_config import RunConfig
from graphctx.prefill import PREFIX_CACHE_BYTES
from graphctx.stack.model_shapes import Shape
from graphctx.stack.shape_table import source_shape

if TYPE_CHECKING:
    import torch

GIB = 2**30
NF4_BLOCK = 64


def dtype_bytes(name: str) -> int:
    """Bytes of one value; ``auto`` is bfloat16 (the CUDA choice)."""
    return {"float32": 4, "32-true": 4}.get(name, 2)


def nf4_bytes(shape: Shape, double_quant: bool, other_dtype: str) -> float:
    """Bytes of a base with its linear weights in NF4 and the rest in ``other_dtype``."""
    state = 1 / NF4_BLOCK + 4 / (NF4_BLOCK * 256) if double_quant else 4 / NF4_BLOCK
    return shape.linear * (0.5 + state) + (shape.params - shape.linear) * dtype_bytes(other_dtype)


def prefill_bytes(shape: Shape, tokens: int, batch: int) -> int:
    """``(h + max(3·h + 2·kv, h + 3·i)) · tokens · batch · 2 + batch · vocab · 4`` bytes (see the module)."""
    attention = 3 * shape.hidden + 2 * shape.kv_width
    feed_forward = shape.hidden + 3 * shape.intermediate
    return (shape.hidden + max(attention, feed_forward)) * tokens * batch * 2 + batch * shape.vocab * 4


def kv_cache_bytes(shape: Shape, tokens: int, batch: int) -> int:
    """layers · 2 (K and V) · kv_heads · head_dim · tokens · batch · 2 bytes (bfloat16)."""
    return shape.layers * 2 * shape.kv_width * tokens * batch * 2


class MemoryEstimate:
    """GiB per rank of each stage of train.py and evaluate.py for one config (:meth:`to_json`)."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self._shapes: dict[str, Shape | None] = {}

    def shape(self, source: str) -> Shape | None:
        if source not in self._shapes:
            spec = self.config.model.spec
            tiny = spec.tiny if source == spec.source else TinyLlamaSettings()
            self._shapes[source] = source_shape(source, tiny)
        return self._shapes[source]

    def weight_bytes(self, source: str, per_param: float) -> float | None:
        """Bytes of ``source``'s weights at ``per_param`` bytes each (None: shape unknown here; the lexical
        judge has no weights)."""
        if source == LEXICAL_JUDGE:
            return 0.0
        shape = self.shape(source)
        return shape.params * per_param if shape is not None else None

    def decoding_bytes(self, source: str, new_tokens: int, batch: int) -> float | None:
        """bfloat16 weights, the prefill of ``batch`` prompts of ``generation.max_prompt_tokens`` and the KV
        cache with ``new_tokens`` more (an extractor or UniversalNER decoding beside the answers)."""
        shape = self.shape(source)
        if shape is None:
            return None
        prompt = self.config.generation.max_prompt_tokens
        kv = kv_cache_bytes(shape, prompt + new_tokens, batch)
        return shape.params * 2 + kv + prefill_bytes(shape, prompt, batch)

    def extractor_bytes(self) -> float | None:
        """The knowledge stage's triplet extractors: REBEL in float32 and the LLM decoding."""
        source = self.config.model.spec.source
        return _total([e.memory_bytes(self, source) for e in selected_extractors(self.config.knowledge)])

    # ---- evaluation ---------------------------------------------------------------------------------
    def evaluate_stages(self) -> dict[str, float | None]:
        """Bytes per stage (None where a model's shape is unknown here): contexts, answers, then each
        metric's stage (:meth:`~graphctx.metrics.registry.MetricEntry.memory_stage`)."""
        config = self.config
        spec, generation = config.model.spec, config.generation
        width = dtype_bytes(generation.dtype)
        base = self.shape(spec.source)
        decode = None
        if base is not None:
            tokens = generation.max_prompt_tokens + generation.max_new_tokens
            decode = base.params * width + kv_cache_bytes(base, tokens, generation.batch_size)
            if generation.backend == "prefix":  # one prompt prefilled at a time, earlier ones' keys kept
                decode += prefill_bytes(base, generation.max_prompt_tokens, 1) + PREFIX_CACHE_BYTES
            else:
                decode += prefill_bytes(base, generation.max_prompt_tokens, generation.batch_size)
        embedder = self.weight_bytes(
            config.retrieval.embedding_model, dtype_bytes(config.retrieval.embedding_dtype)
        )
        stages = {"contexts": _total([embedder, self.extractor_bytes()]), "answers": decode}
        for entry in config.metric_entries:
            stage = entry.memory_stage()
            if stage is not None:
                stages[stage] = entry.memory_bytes(self)
        return stages

    def serve_bytes(self) -> float | None:
        """``graphctx serve`` holds its stages together, loaded once: the contexts' models (embedder,
        extractors) and the answer model decoding one batch (:meth:`evaluate_stages`); no metric. The
        pool's index (N × d float32 embeddings and the graph) comes on top."""
        stages = self.evaluate_stages()
        return _total([stages["contexts"], stages["answers"]])

    # ---- training -----------------------------------------------------------------------------------
    def train_bytes(self) -> float | None:
        """Frozen base + LoRA state + activations of one batch of ``data.batch_size × data.max_length``."""
        config = self.config
        spec, lora, data = config.model.spec, config.model.lora, config.data
        shape = self.shape(spec.source)
        if shape is None:
            return None
        if spec.quantization == "nf4":
            base = nf4_bytes(shape, spec.double_quant, spec.compute_dtype)
        else:
            base = shape.params * dtype_bytes(spec.compute_dtype)
        adapter = sum(
            lora.r * (widths[0] + widths[1])
            for name, widths in shape.lora_widths.items()
            if name in lora.target_modules
        )
        adapter *= shape.layers
        optimizer = 10 if config.model.optimizer.name == "paged_adamw_8bit" else 16
        tokens = data.batch_size * data.max_length
        block = (13 * shape.hidden + 2 * shape.kv_width + 5 * shape.intermediate) * 2 * tokens
        if spec.gradient_checkpointing:
            recomputed = math.ceil(spec.checkpoint_fraction * shape.layers)
            kept = shape.layers - recomputed
            activations = recomputed * shape.hidden * 2 * tokens + (kept + 1) * block
        else:
            activations = shape.layers * block
        logits = 2 * min(tokens, spec.loss_chunk_tokens) * shape.vocab * 4
        return _total([base + adapter * optimizer + activations + logits, self.callback_bytes(shape)])

    def callback_bytes(self, shape: Shape) -> float | None:
        """What the validation callback adds on rank 0 while training holds its memory: the KV cache of its
        answers (the training model decodes them), and its scorers when ``callback_device`` is CUDA (REBEL
        for the fact score on the knowledge device, counted likewise)."""
        evaluation = self.config.evaluation
        if evaluation.callback_every_n_validations <= 0:
            return 0.0
        generation = self.config.generation
        batch = min(evaluation.callback_examples, generation.batch_size)
        tokens = generation.max_prompt_tokens + generation.max_new_tokens
        parts: list[float | None] = [float(kv_cache_bytes(shape, tokens, batch))]
        on_cuda = evaluation.callback_device.startswith("cuda")
        for entry in self.config.metric_entries:
            if entry.name in evaluation.callback_metrics:
                parts += entry.callback_bytes(self, on_cuda)
        return _total(parts)

    def to_json(self) -> dict[str, Any]:
        """``train.peak_gib``, ``evaluate.peak_gib`` and ``serve.peak_gib`` per rank, ``evaluate.stages``
        (stage → GiB)."""
        stages = {name: _gib(value) for name, value in self.evaluate_stages().items()}
        known = [value for value in stages.values() if value is not None]
        complete = bool(known) and len(known) == len(stages)
        peak_stage = max(stages, key=lambda k: stages[k] or 0.0) if complete else None
        return {
            "per": "rank (every rank loads the same models)",
            "assumes": "CUDA dtypes (auto = bfloat16); CUDA context and fragmentation not counted",
            "unknown": sorted(k for k, v in stages.items() if v is None),
            "train": {"peak_gib": _gib(self.train_bytes())},
            "serve": {"peak_gib": _gib(self.serve_bytes()), "excludes": "the pool's index"},
            "evaluate": {
                "peak_gib": stages[peak_stage] if peak_stage else None,
                "peak_stage": peak_stage,
                "stages": stages,
            },
        }


def _total(parts: list[float | None]) -> float | None:
    return None if any(part is None for part in parts) else float(sum(parts))  # type: ignore[arg-type]


def _gib(value: float | None) -> float | None:
    return None if value is None else round(value / GIB, 2)


def check_memory(memory: dict[str, Any], command: str, device: torch.device | str) -> None:
    """Refuse to start ``command`` (``train`` or ``evaluate``) on a CUDA ``device`` with less free memory
    than its estimate (:meth:`MemoryEstimate.to_json`), naming the stage and GiB. On the CPU nothing is
    checked: weights are memory-mapped and the OS pages, so free RAM says little about what fits."""
    import torch

    device = torch.device(device)
    if device.type != "cuda" or not torch.cuda.is_available():
        return
    if command == "train":
        need, stage = memory["train"]["peak_gib"], "training"
    else:
        need, stage = memory["evaluate"]["peak_gib"], memory["evaluate"]["peak_stage"]
    if need is None:
        return
    free, total = torch.cuda.mem_get_info(device)
    if need * GIB > free:
        raise ConfigError(
            f"{command}: the {stage} stage needs about {need:.1f} GiB per rank, {device} has "
            f"{free / GIB:.1f} GiB free of {total / GIB:.1f} (graphctx plan --json: memory)"
        )
