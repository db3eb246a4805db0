"""The LightningModule that instruction-tunes a (Q)LoRA adapter on question -> answer batches.

Batches follow the DataModule contract: ``input_ids`` and ``labels`` [B, T] (labels -100 on prompt and pad),
``position_ids`` [B, T] restarting at 0 for each packed example, and ``attention_mask`` only when unpacked.
"""

from __future__ import annotations

import dataclasses
import json
import math
import resource
import time
import typing
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_only
from torchmetrics.aggregation import MeanMetric

from graphctx.model.attention import VARLEN, varlen_keyword_arguments
from graphctx.model.card import adapter_card, base_model_id
from graphctx.model.export import export_adapter, export_merged
from graphctx.model.liger import apply_liger, check_liger, liger_answer_cross_entropy_sum
from graphctx.model.loading import (
    attach_lora,
    compile_blocks,
    enable_checkpointing,
    load_base_model,
    load_tokenizer,
)
from graphctx.model.loss import IGNORE_INDEX, answer_cross_entropy_sum
from graphctx.model.optim import build_optimizer, build_scheduler
from graphctx.model.resume import reopen_stopped_epoch
from graphctx.model.settings import ExportSettings, TunerSettings

T = TypeVar("T")


def real_token_mask(batch: dict[str, torch.Tensor], pad_token_id: int | None) -> torch.Tensor:
    """[B, T] bool, True on real tokens: ``attention_mask`` when given, else all but a packed row's tail pad.

    A packed row is right-padded with one more "example" whose positions restart at 0; that last segment
    is padding when every token in it is ``pad_token_id`` and none has a label (a real example always has
    answer labels).
    """
    if "attention_mask" in batch:
        return batch["attention_mask"].bool()
    if pad_token_id is None:
        return torch.ones_like(batch["input_ids"], dtype=torch.bool)
    segment = torch.cumsum(batch["position_ids"] == 0, dim=1)
    last = segment == segment[:, -1:]
    not_pad = (batch["input_ids"] != pad_token_id) | (batch["labels"] != IGNORE_INDEX)
    tail_is_pad = ~(last & not_pad).any(dim=1, keepdim=True)
    return ~(last & tail_is_pad)


def remove_padding(batch: dict[str, torch.Tensor], pad_token_id: int | None) -> dict[str, torch.Tensor]:
    """One packed row [1, N] holding only the real tokens of ``batch`` (no ``attention_mask`` left).

    Rows are concatenated without their pads (:func:`real_token_mask`); position ids restart at 0 for each
    example, which marks the example boundaries.
    """
    keep = real_token_mask(batch, pad_token_id)
    return {name: batch[name][keep].unsqueeze(0) for name in ("input_ids", "labels", "position_ids")}


def next_token_targets(labels: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
    """Targets for positions 0..T-2: ``labels`` shifted left, -100 where the next token starts an example."""
    targets = labels[:, 1:].clone()
    targets[position_ids[:, 1:] == 0] = IGNORE_INDEX
    return targets


def peak_memory_gib(device: torch.device) -> float:
    """Peak memory so far: CUDA allocator peak on GPU, the process's max resident set on CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux reports KiB


def exported_adapter_dir(export: ExportSettings, root_dir: str) -> Path:
    """Where training exports the adapter: ``export.adapter_dir`` or ``<root_dir>/adapter`` (``root_dir``:
    the Trainer's ``default_root_dir``, the working directory when unset)."""
    return Path(export.adapter_dir or Path(root_dir) / "adapter")


def fit_optimizer_steps(trainer: L.Trainer) -> int:
    """Optimiser steps this fit will take: ``max_steps``, or fewer when ``max_epochs`` ends it first.

    Counts the batches on a throwaway loader of the DataModule, not with
    ``trainer.estimated_stepping_batches``: that builds the fit loop's own loader before a checkpoint's
    data position is restored into it, and a resumed run would start its epoch over.
    """
    limits = [trainer.max_steps] if trainer.max_steps > 0 else []
    if trainer.datamodule is None:
        return min(limits) if limits else int(trainer.estimated_stepping_batches)
    if trainer.max_epochs is not None and trainer.max_epochs > 0:
        batches = math.ceil(len(trainer.datamodule.train_dataloader()) / trainer.world_size)
        limit = trainer.limit_train_batches
        batches = min(batches, limit) if isinstance(limit, int) else int(batches * limit)
        limits.append(math.ceil(batches / trainer.accumulate_grad_batches) * trainer.max_epochs)
    if not limits:
        raise ValueError("set trainer.max_steps or trainer.max_epochs: the schedule needs a length")
    return min(limits)


def plain_to_dataclass(kind: type[T], plain: dict[str, Any]) -> T:
    """The dataclass ``kind`` from its ``asdict`` form (nested dataclasses rebuilt, lists back to tuples
    where the field is a tuple); an unknown or missing field is the constructor's ``TypeError``."""
    hints = typing.get_type_hints(kind)
    values = {}
    for name, value in plain.items():
        hint = hints.get(name)
        if dataclasses.is_dataclass(hint) and isinstance(value, dict):
            value = plain_to_dataclass(hint, value)
        elif typing.get_origin(hint) is tuple and isinstance(value, list):
            value = tuple(value)
        values[name] = value
    return kind(**values)


class InstructionTuner(L.LightningModule):
    """QLoRA/LoRA instruction tuning with the loss on answer tokens only, built from the ``model`` section's
    :class:`~graphctx.model.settings.TunerSettings` (also its checkpoints' hyper-parameters).

    The loss of one optimiser step is the mean cross-entropy over every answer token of the step: all
    micro-batches of the accumulation window on all ranks, ``L = (1/N) sum_t CE_t`` with ``N`` the step's
    global answer-token count, which a single batch holding the whole step would give (torchtune's
    normalisation; a mean per micro-batch would weight a 300-token micro-batch like a 3,000-token one).
    Each micro-batch returns its unnormalised sum; Lightning divides it by ``accumulate_grad_batches`` (A)
    and DDP averages gradients over the ``W`` ranks, so before the optimiser step (and before gradient
    clipping) the gradients are multiplied by ``A * W / N``, ``N`` being one all-reduce of the window's
    counts. This holds for strategies that average gradients over ranks (DDP, FSDP), not for DeepSpeed.

    Checkpoints hold only the trainable adapter weights (plus Lightning's optimizer, scheduler and loop
    state); the frozen base is rebuilt from ``spec`` in :meth:`configure_model`. At the end of training the
    adapter is exported in peft format (and, if asked, merged into a bf16 copy of the base).
    """

    def __init__(self, settings: TunerSettings | None = None, **saved: Any) -> None:
        """``settings``; or, as ``load_from_checkpoint`` passes a checkpoint's hyper-parameters, its fields
        as plain values (``saved``)."""
        super().__init__()
        if settings is None:
            settings = plain_to_dataclass(TunerSettings, saved)
        # JSON-plain dicts (no tuples), so checkpoints load with torch.load(weights_only=True) and every
        # logger (YAML, W&B) can write them
        self.save_hyperparameters(json.loads(json.dumps(asdict(settings))))
        self.settings = settings
        self.spec = settings.spec
        self.model = None
        self.pad_token_id: int | None = None
        self.strict_loading = False  # checkpoints carry the adapter only; the base comes from `spec`
        self._last_step_end: float | None = None
        self._window = torch.zeros(2, dtype=torch.float64)  # (CE sum, answer tokens) of this step so far
        self.val_loss = MeanMetric()  # token-weighted over batches and ranks

    # ---- model -------------------------------------------------------------------------------------
    def configure_model(self) -> None:
        """Load the frozen (quantised) base on this process's device and attach the adapter, once."""
        if self.model is not None:
            return
        check_liger(self.spec, self.device)
        self.pad_token_id = load_tokenizer(self.spec).pad_token_id  # the DataModule pads with it
        base = load_base_model(self.spec, device=self.device)
        if self.spec.liger:
            apply_liger(base)
        if self.spec.gradient_checkpointing:
            enable_checkpointing(base, self.spec.checkpoint_fraction)
        self.model = attach_lora(base, self.settings.lora)
        if self.spec.compile:
            compile_blocks(self.model)
        self.model.train()  # from_pretrained returns eval mode; Lightning switches modes from here on

    def trainable_parameter_names(self) -> set[str]:
        """Names (as in this module's ``state_dict``) of the parameters the optimiser updates."""
        return {name for name, parameter in self.named_parameters() if parameter.requires_grad}

    def hidden_states(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The decoder's last hidden states for ``batch`` as training computes them, and the batch they line
        up with: under varlen attention that is one row of the real tokens (:func:`remove_padding`)."""
        base = self.model.get_base_model()
        extra: dict[str, Any] = {}
        if base.config._attn_implementation == VARLEN:
            # every example back to back in one row, pads dropped: no compute on pads, none across examples
            batch = remove_padding(batch, self.pad_token_id)
            extra = varlen_keyword_arguments(batch["position_ids"])
        hidden = base.get_decoder()(
            input_ids=batch["input_ids"],
            position_ids=batch["position_ids"],
            attention_mask=batch.get("attention_mask"),
            use_cache=False,
            **extra,
        ).last_hidden_state
        return hidden, batch

    def answer_loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, int]:
        """``(sum of the cross-entropy over the answer tokens of batch, their number)``."""
        base = self.model.get_base_model()
        hidden, batch = self.hidden_states(batch)
        targets = next_token_targets(batch["labels"], batch["position_ids"])
        if self.spec.liger:
            return liger_answer_cross_entropy_sum(hidden[:, :-1], targets, base.get_output_embeddings())
        return answer_cross_entropy_sum(
            hidden[:, :-1], targets, base.get_output_embeddings(), self.spec.loss_chunk_tokens
        )

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Mean cross-entropy over the answer tokens of ``batch``."""
        total, count = self.answer_loss(batch)
        return total / max(count, 1)

    # ---- steps and logging -------------------------------------------------------------------------
    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        """The micro-batch's cross-entropy sum; :meth:`on_before_optimizer_step` turns the step's sums
        into the mean over its answer tokens."""
        total, count = self.answer_loss(batch)
        counted = torch.stack([total.detach().double(), total.new_tensor(count, dtype=torch.float64)])
        self._window = self._window.to(counted.device) + counted  # no host sync per micro-batch
        self.log("train/lr", self.optimizers().param_groups[0]["lr"], batch_size=1)
        return total

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Scale the accumulated gradients to those of the step's token mean and log that mean.

        After backward each gradient is ``(1 / (A * W)) * grad(sum of the step's CE)``: Lightning divided
        every micro-batch loss by A, DDP averaged over W ranks. Multiplying by ``A * W / N`` leaves
        ``grad((1 / N) * sum of the step's CE)``.
        """
        total, tokens = self.trainer.strategy.reduce(self._window.to(self.device), reduce_op="sum").tolist()
        self._window = torch.zeros_like(self._window)
        tokens = max(tokens, 1.0)
        scale = self.trainer.accumulate_grad_batches * self.trainer.world_size / tokens
        for parameter in self.parameters():
            if parameter.grad is not None:
                parameter.grad.mul_(scale)
        self.log("train/loss", total / tokens, prog_bar=True, batch_size=1)

    def on_train_epoch_start(self) -> None:
        self._last_step_end = None
        self._window = torch.zeros_like(self._window)

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        total, count = self.answer_loss(batch)
        self.val_loss.update(total / max(count, 1), weight=count)
        self.log("val/loss", self.val_loss, prog_bar=True)

    def on_train_batch_end(self, outputs: Any, batch: dict[str, torch.Tensor], batch_idx: int) -> None:
        """Log real (non-pad) tokens per second over the interval since the previous step, and peak memory."""
        now = time.perf_counter()
        if self._last_step_end is not None:
            tokens = int(real_token_mask(batch, self.pad_token_id).sum())
            self.log("train/tokens_per_s", tokens / (now - self._last_step_end), prog_bar=True, batch_size=1)
        self.log("train/peak_mem_gib", peak_memory_gib(self.device), batch_size=1)
        self._last_step_end = now

    def configure_optimizers(self) -> dict[str, Any]:
        parameters = [parameter for parameter in self.parameters() if parameter.requires_grad]
        optimizer = build_optimizer(parameters, self.settings.optimizer, self.device)
        scheduler = build_scheduler(optimizer, self.settings.optimizer, fit_optimizer_steps(self.trainer))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    # ---- checkpoints and export --------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Keep only the adapter weights: the frozen base is a function of ``spec`` and is not saved."""
        trainable = self.trainable_parameter_names()
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in trainable}

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Refuse a checkpoint whose adapter does not match this one (names checked, not silently skipped);
        reopen an epoch that ``max_steps`` stopped (:func:`~graphctx.model.resume.reopen_stopped_epoch`).
        Outside a Trainer (``load_from_checkpoint``) the base and adapter are built here first."""
        self.configure_model()
        saved, expected = set(checkpoint["state_dict"]), self.trainable_parameter_names()
        if saved != expected:
            missing, unexpected = sorted(expected - saved)[:3], sorted(saved - expected)[:3]
            raise ValueError(
                "checkpoint adapter does not match model.lora / model.spec: "
                f"missing e.g. {missing}, unexpected e.g. {unexpected}"
            )
        reopen_stopped_epoch(checkpoint)

    def adapter_dir(self) -> Path:
        """Where the adapter is exported (:func:`exported_adapter_dir`)."""
        return exported_adapter_dir(self.settings.export, self.trainer.default_root_dir)

    @rank_zero_only
    def on_train_end(self) -> None:
        data = getattr(self.trainer.datamodule, "settings", None)
        card = adapter_card(self.settings, self.trainer, data)
        base = base_model_id(self.spec)
        target = export_adapter(self.model, load_tokenizer(self.spec), self.adapter_dir(), base, card)
        export = self.settings.export
        if export.merge:
            merged = export.merged_dir or Path(self.trainer.default_root_dir) / "merged"
            export_merged(self.spec, target, merged, export.merge_base)
