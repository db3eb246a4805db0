"""Silence third-party output known to be harmless, so that what graphctx prints can be read.

Each entry says who prints it and why it does not concern a graphctx user; anything else still shows.
"""

from __future__ import annotations

import logging
import re
import warnings

HARMLESS_LOGGERS = ("bitsandbytes.backends.cpu.ops", "kernels._internals.hf_hub")
"""bitsandbytes' CPU backend warns, on machines with AVX512-BF16, that it cannot load its ``kernels`` hub
kernel (``kernels`` missing, or offline: it is never downloaded); it falls back to its own kernel. While it
tries offline, ``kernels`` (a dependency of transformers >= 5.25) warns that it skips the publisher check."""

HARMLESS_WARNINGS: tuple[tuple[str, type[Warning]], ...] = (
    # torchdata's StatefulDataLoader calls torch.set_vital, deprecated in torch 2.13
    ("'set_vital' is deprecated", UserWarning),
    # peft's get_peft_model reads transformers' deprecated alias of is_activation_checkpointing
    ("`is_gradient_checkpointing` is deprecated", FutureWarning),
    # torch marks every sparse CSR tensor as beta; PageRank's matrix-vector products are covered by tests
    ("Sparse CSR tensor support is in beta state", UserWarning),
    # Lightning's CombinedLoader (every loop's batches) builds torch's LeafSpec, deprecated in current torch
    ("`isinstance(treespec, LeafSpec)` is deprecated", FutureWarning),
    # Lightning, on a machine that has SLURM installed, when a run is not started with srun
    ("The `srun` command is available on your system but is not used", Warning),
)
"""``(start of the message, category)`` of warnings raised by third-party code on graphctx's behalf; the
messages are literal text (escaped before ``warnings`` reads them as a regular expression)."""


def quiet_third_party() -> None:
    """Raise the known-noisy loggers to errors and ignore the known-harmless warnings (before or after the
    libraries are imported)."""
    for name in HARMLESS_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
    for message, category in HARMLESS_WARNINGS:
        warnings.filterwarnings("ignore", message=re.escape(message), category=category)
