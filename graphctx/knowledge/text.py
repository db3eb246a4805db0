"""Small text helpers shared by the extractors: prose without code, sentence windows."""

from __future__ import annotations

import re
from collections.abc import Callable

_FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def strip_code_blocks(text: str) -> str:
    """The text with fenced code blocks (```...```) replaced by a blank line: extractors read prose."""
    return _FENCED_CODE.sub("\n\n", text)


def sentence_windows(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> list[str]:
    """Greedy packing of consecutive sentences into windows of at most ``max_tokens`` tokens.

    A single sentence longer than the limit becomes its own window (the model's tokenizer truncates it).
    """
    windows: list[str] = []
    current: list[str] = []
    used = 0
    for sentence in (s.strip() for s in _SENTENCE_END.split(text)):
        if not sentence:
            continue
        size = count_tokens(sentence)
        if current and used + size > max_tokens:
            windows.append(" ".join(current))
            current, used = [], 0
        current.append(sentence)
        used += size
    if current:
        windows.append(" ".join(current))
    return windows
