"""Subcommands of the ``graphctx`` console script, one module each."""

from __future__ import annotations

import argparse


def question_text(value: str) -> str:
    """``--question``: refused when empty or only whitespace (nothing to retrieve or answer for)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("the question is empty")
    return value
