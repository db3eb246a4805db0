r"""Cost before running (``graphctx plan --cost``): GPU-hours per stage of train.py and evaluate.py for one
config, from its split sizes, the variant matrix, token limits, epochs and measured throughputs.

With :math:`n_{\mathrm{train}}` training rows, :math:`L` = ``data.max_length``, :math:`E` epochs and
:math:`S` = ``trainer.max_steps`` optimiser steps of :math:`b` = ``data.batch_size`` ×
``accumulate_grad_batches`` rows:

.. math::
    T_{\mathrm{train}} = \min(E\,n_{\mathrm{train}},\ S\,b)\cdot L \,/\, r_{\mathrm{train}},\qquad
    T_{\mathrm{answers}} = n_{\mathrm{eval}}\cdot V_{\mathrm{LLM}}\cdot m \,/\, r_{\mathrm{new}},

with :math:`n_{\mathrm{eval}}` = the evaluated split cut to ``evaluation.limit``, :math:`V_{\mathrm{LLM}}` the
variants that decode with the LLM, :math:`m` = ``generation.max_new_tokens``, and :math:`r` the measured
throughputs (real tokens/s of QLoRA training, new tokens/s of answer generation), scaled from the model
they were measured on to the config's by parameter count (time ∝ parameters). Both are upper bounds: every
row counts at ``max_length`` (packing fills rows to it) and every answer at ``max_new_tokens``. Prefill,
retrieval, the knowledge stage and scoring are not in the GPU-hours (named as such in the output); peak
memory per rank is the memory plan's (:mod:`graphctx.stack.memory`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphctx.errors import ConfigError
from graphctx.prompts import get_variants
from graphctx.stack.memory import MemoryEstimate
from graphctx.stack.model_stack import ModelStack

MEASURED_PARAMS = 6_738_415_616
"""Parameters of the Llama-2-7B shape that docs/performance.md's and the GPU suite's throughputs are
measured on."""


@dataclass(frozen=True)
class Throughputs:
    """Measured throughputs on one GPU, and where they come from."""

    train_tokens_per_s: float
    new_tokens_per_s: float
    source: str


LAST_MEASURED = Throughputs(
    8909.0,
    922.0,
    "the README's last measured H200 figures, older stack (transformers 5.17; Llama-2-7B shape: "
    "benchmarks/train_throughput.py 8,909 real tokens/s, benchmarks/generate_throughput.py 922 new tokens/s, "
    "graphctx's path alone)",
)


def read_throughputs(report: Path) -> Throughputs:
    """The training and generation throughputs of a ``benchmarks/gpu_suite.py`` report (gpu_suite.json)."""
    try:
        targets = json.loads(report.read_text())["targets"]
        train = float(targets["training"]["value"]["tokens_per_s"])
        new = float(targets["generation"]["value"]["new_tokens_per_s"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigError(
            f"--throughput: {report} is not a gpu_suite.json with training and generation figures ({error})"
        ) from None
    return Throughputs(train, new, f"the GPU suite report {report}")


def parse_counts(text: str) -> dict[str, int]:
    """``train=N,test=M`` → the rows of each split."""
    counts: dict[str, int] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if not name.strip() or not value.strip().isdigit():
            raise ConfigError(f"--counts: expected split=rows pairs like train=351,test=45, got {part!r}")
        counts[name.strip()] = int(value)
    return counts


def _hours(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 3600, 6)


def cost_json(stack: ModelStack, counts: Mapping[str, int], throughputs: Throughputs) -> dict[str, Any]:
    """GPU-hours per stage and in total, the peak memory per rank, and what the estimate assumes."""
    config = stack.config
    evaluation, data, generation = config.evaluation, config.data, config.generation
    split = evaluation.split
    missing = sorted({"train", split} - set(counts))
    if missing:
        raise ConfigError(f"--counts: no row count for split(s) {missing}")
    shape = MemoryEstimate(config).shape(config.model.spec.source)
    scale = shape.params / MEASURED_PARAMS if shape is not None else None
    trainer = config.trainer
    epochs = trainer.get("max_epochs") or 1
    steps = trainer.get("max_steps", -1)
    per_step = data.batch_size * trainer.get("accumulate_grad_batches", 1)
    rows = epochs * counts["train"]
    if steps is not None and steps >= 0:
        rows = min(rows, steps * per_step)
    train_tokens = rows * data.max_length
    evaluated = min(counts[split], evaluation.limit) if evaluation.limit else counts[split]
    llm_variants = [v.name for v in get_variants(evaluation.variants) if v.model != "none"]
    new_tokens = evaluated * len(llm_variants) * generation.max_new_tokens
    train_s = None if scale is None else train_tokens / throughputs.train_tokens_per_s * scale
    answer_s = None if scale is None else new_tokens / throughputs.new_tokens_per_s * scale
    parts = [train_s, answer_s]
    total = None if any(p is None for p in parts) else sum(parts)  # type: ignore[arg-type]
    memory = stack.memory
    return {
        "counts": dict(counts),
        "throughputs": {
            "train_tokens_per_s": throughputs.train_tokens_per_s,
            "new_tokens_per_s": throughputs.new_tokens_per_s,
            "source": throughputs.source,
            "scaled_by_params": None if scale is None else round(scale, 6),
        },
        "stages": {
            "train": {
                "rows": rows,
                "tokens": train_tokens,
                "gpu_hours": _hours(train_s),
                "peak_gib": memory["train"]["peak_gib"],
            },
            "answers": {
                "rows": evaluated,
                "variants": llm_variants,
                "new_tokens": new_tokens,
                "gpu_hours": _hours(answer_s),
                "peak_gib": memory["evaluate"]["peak_gib"],
            },
        },
        "gpu_hours": _hours(total),
        "upper_bounds": "training rows at data.max_length, answers at generation.max_new_tokens",
        "not_counted": "prefill, retrieval and the knowledge stage, scoring, model loading",
    }


def cost_text(cost: Mapping[str, Any]) -> str:
    """The estimate as a few lines under the plan."""
    stages = cost["stages"]

    def hours(value: float | None) -> str:
        return "unknown (model shape unknown here)" if value is None else f"{value:.4g} GPU-h"

    train, answers, rates = stages["train"], stages["answers"], cost["throughputs"]
    lines = [
        f"  cost         {hours(cost['gpu_hours'])} in all (upper bound; {cost['not_counted']} not counted)",
        f"               train: {train['rows']} rows × max_length = {train['tokens']:,} tokens → "
        f"{hours(train['gpu_hours'])}, {train['peak_gib']} GiB per rank",
        f"               answers: {answers['rows']} rows × {len(answers['variants'])} LLM variants → "
        f"{answers['new_tokens']:,} new tokens → {hours(answers['gpu_hours'])}, "
        f"{answers['peak_gib']} GiB per rank",
        f"               throughputs from {rates['source']}, scaled by parameters × "
        f"{rates['scaled_by_params']}",
    ]
    return "\n".join(lines)
