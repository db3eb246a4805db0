"""Training progress as plain lines, for logs that are not a terminal (a SLURM ``.out``, a pipe, a file).

Lightning's progress bar redraws one terminal line in place; written to a file it shows nothing (rich) or
carriage-return noise. When stderr is not a terminal, :class:`PlainProgress` prints one line every
``every_n_steps`` optimiser steps or ``every_s`` seconds, whichever comes first, and one when training ends::

    progress: step 12/24 (50%), epoch 0, train/loss 2.3141, 0.41 steps/s, elapsed 0:00:29, left ~0:00:29
    progress: training ended at step 24/24 (100%), elapsed 0:00:58
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from typing import Any, TextIO

import lightning as L
from lightning.pytorch.utilities import rank_zero_only

from graphctx.errors import ConfigError

EVERY_N_STEPS = 10
"""Default: a line every 10 optimiser steps ..."""
EVERY_S = 60.0
"""... or every 60 seconds, whichever comes first."""


def _clock(seconds: float) -> str:
    return str(timedelta(seconds=round(seconds)))


class PlainProgress(L.Callback):
    """One ``progress:`` line on stderr every ``every_n_steps`` optimiser steps or ``every_s`` seconds
    (whichever first) and at the end of training: step, share of ``max_steps``, epoch, the last
    ``train/loss``, steps per second, elapsed and estimated time left. train.py adds it (with the defaults,
    10 steps / 60 s) when stderr is not a terminal; list it under ``trainer.callbacks`` to change them."""

    def __init__(self, every_n_steps: int = EVERY_N_STEPS, every_s: float = EVERY_S) -> None:
        if every_n_steps < 1 or not every_s > 0:
            raise ConfigError(
                f"trainer.callbacks PlainProgress: every_n_steps {every_n_steps} must be at least 1 and "
                f"every_s {every_s} above 0"
            )
        self.every_n_steps = every_n_steps
        self.every_s = every_s
        self._start = self._last = 0.0
        self._first_step = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = self._last = time.monotonic()
        self._first_step = trainer.global_step  # a resumed run counts its rate from here

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        now, step = time.monotonic(), trainer.global_step
        if step > self._first_step and (step % self.every_n_steps == 0 or now - self._last >= self.every_s):
            self.write(trainer, sys.stderr)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.write(trainer, sys.stderr, end=True)

    @rank_zero_only
    def write(self, trainer: L.Trainer, out: TextIO, end: bool = False) -> None:
        now, step = time.monotonic(), trainer.global_step
        self._last = now
        elapsed = now - self._start
        rate = (step - self._first_step) / elapsed if elapsed > 0 else 0.0
        of_max = (
            f"/{trainer.max_steps} ({100 * step / trainer.max_steps:.0f}%)" if trainer.max_steps > 0 else ""
        )
        if end:
            line = f"training ended at step {step}{of_max}, elapsed {_clock(elapsed)}"
        else:
            parts = [f"step {step}{of_max}", f"epoch {trainer.current_epoch}"]
            loss = trainer.callback_metrics.get("train/loss")
            if loss is not None:
                parts.append(f"train/loss {float(loss):.4f}")
            parts += [f"{rate:.2f} steps/s", f"elapsed {_clock(elapsed)}"]
            if trainer.max_steps > 0 and rate > 0:
                parts.append(f"left ~{_clock((trainer.max_steps - step) / rate)}")
            line = ", ".join(parts)
        print(f"progress: {line}", file=out, flush=True)
