"""What a client may send: request bodies read, checked and turned into work, or refused with a 4xx and
one clear message (:class:`RequestError`); nothing a client sends reaches the model or the pool unchecked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from graphctx.prompts import VARIANTS
from graphctx.retrieval.scale.updates import PoolUpdate


class RequestError(Exception):
    """A refused request: its HTTP ``status`` and one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Limits:
    """Request limits: body bytes, question characters and tokens (the generation tokenizer's)."""

    max_body_bytes: int = 65536
    max_question_chars: int = 8000
    max_question_tokens: int = 1024


def read_body(body: bytes, limits: Limits) -> dict[str, Any]:
    """The JSON object of a request body: 413 when over ``max_body_bytes``, 400 when not UTF-8, not JSON
    or not an object."""
    if len(body) > limits.max_body_bytes:
        raise RequestError(
            413, f"request body is {len(body)} bytes, over the limit of {limits.max_body_bytes}"
        )
    try:
        payload = json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise RequestError(400, f"request body is not UTF-8 (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise RequestError(400, f"request body is not JSON: {error.msg} at character {error.pos}") from None
    if not isinstance(payload, dict):
        raise RequestError(400, "request body must be a JSON object")
    return payload


def question_text(payload: Mapping[str, Any], key: str, limits: Limits, count: Callable[[str], int]) -> str:
    """``payload[key]`` as a question: 400 when missing, not text, empty, or over ``max_question_chars`` or
    ``max_question_tokens`` (``count``: the tokenizer's count)."""
    text = payload.get(key)
    if not isinstance(text, str):
        raise RequestError(400, f"'{key}' must be a string")
    if not text.strip():
        raise RequestError(400, f"'{key}' is empty")
    if "\x00" in text or any(0xD800 <= ord(char) <= 0xDFFF for char in text):
        raise RequestError(400, f"'{key}' holds a NUL or an unpaired surrogate (not valid UTF-8 text)")
    if len(text) > limits.max_question_chars:
        raise RequestError(
            400, f"'{key}' has {len(text)} characters, over the limit of {limits.max_question_chars}"
        )
    tokens = count(text)
    if tokens > limits.max_question_tokens:
        raise RequestError(
            400, f"'{key}' has {tokens} tokens, over the limit of {limits.max_question_tokens}"
        )
    return text


def answer_request(
    payload: Mapping[str, Any], limits: Limits, count: Callable[[str], int], default_variant: str
) -> tuple[str, str]:
    """``POST /v1/answer``'s ``{question, variant?}`` as ``(question, variant name)``."""
    unknown = sorted(set(payload) - {"question", "variant"})
    if unknown:
        raise RequestError(400, f"unknown field '{unknown[0]}' (fields: question, variant)")
    variant = payload.get("variant", default_variant)
    if variant not in VARIANTS:
        raise RequestError(400, f"unknown variant {variant!r} (one of {', '.join(VARIANTS)})")
    return question_text(payload, "question", limits, count), variant


def question_id(value: Any) -> int:
    """A question id: a positive integer below 2**63, else 400."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
        raise RequestError(400, "question id must be a positive integer")
    return value


def answer_text(payload: Mapping[str, Any], limits: Limits) -> str | None:
    """The optional accepted answer: None when not given, 400 when not text or over the body limit."""
    answer = payload.get("answer")
    if answer is not None and not isinstance(answer, str):
        raise RequestError(400, "'answer' must be a string")
    return answer


def write_request(
    operation: str,
    payload: Mapping[str, Any],
    qid: Any,
    current: Mapping[int, str],
    limits: Limits,
    count: Callable[[str], int],
) -> tuple[PoolUpdate, dict[int, str]]:
    """An add (``{id, question, answer?}``), edit (``{question?, answer?}`` of question ``qid``) or delete
    as a :class:`PoolUpdate` and the answers it sets; ``current``: the pool's questions by id (404 for an
    unknown one, 409 for an id added twice)."""
    allowed = {"add": {"id", "question", "answer"}, "edit": {"question", "answer"}, "delete": set()}[
        operation
    ]
    unknown = sorted(set(payload) - allowed)
    if unknown:
        raise RequestError(400, f"unknown field '{unknown[0]}' for {operation}")
    qid = question_id(payload.get("id") if operation == "add" else qid)
    if operation == "add":
        if qid in current:
            raise RequestError(409, f"question {qid} is already in the pool")
        answer = answer_text(payload, limits)
        text = question_text(payload, "question", limits, count)
        return PoolUpdate(added=((qid, text),)), {qid: answer or ""}
    if qid not in current:
        raise RequestError(404, f"question {qid} is not in the pool")
    if operation == "delete":
        return PoolUpdate(deleted=(qid,)), {}
    if "question" not in payload and "answer" not in payload:
        raise RequestError(400, "an edit needs 'question' or 'answer'")
    text = question_text(payload, "question", limits, count) if "question" in payload else current[qid]
    answer = answer_text(payload, limits)
    return PoolUpdate(edited=((qid, text),)), ({qid: answer} if answer is not None else {})
