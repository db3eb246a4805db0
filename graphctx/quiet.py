"""Silence third-party output known to be harmless, so that what graphctx prints can be read."""

from __future__ import annotations

import logging

HARMLESS_LOGGERS = ("bitsandbytes.backends.cpu.ops",)
"""Loggers whose warnings say nothing to a graphctx user: bitsandbytes' CPU backend warns, on machines
with AVX512-BF16, that the optional ``kernels`` package is missing (it falls back to its own kernel)."""


def quiet_third_party() -> None:
    """Raise the level of the known-noisy loggers to errors (works before or after their import)."""
    for name in HARMLESS_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)
