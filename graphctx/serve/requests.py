"""What a client may send: request bodies received, read, checked and turned into work, or refused with a
4xx and one clear message (:class:`RequestError`); nothing a client sends reaches the model or the pool
unchecked.

A body is one JSON object of at most ``max_body_bytes``, received whole within ``body_timeout_s``
(:func:`receive_body`), UTF-8, each key once, each field a string, a number, a boolean or null, every text
free of NUL and unpaired surrogates (:func:`read_body`). Question ids are ASCII digits or JSON integers in
``1 .. 2**63 - 1`` (:func:`question_id`).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from graphctx.prompts import VARIANTS
from graphctx.retrieval.scale.updates import PoolUpdate

ASCII_ID = re.compile(r"[0-9]{1,19}")
"""A question id as text: ASCII digits only (``str.isdigit`` also takes ``٣``, ``３``, ``²``)."""
MAX_INTEGER_DIGITS = 20
"""The longest integer a body may hold (ids are below 2**63, 19 digits); Python refuses to read integers
of over 4300 digits with an error of its own."""


class RequestError(Exception):
    """A refused request: its HTTP ``status`` and one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Limits:
    """Request limits: body bytes, question characters and tokens (the generation tokenizer's), and the
    seconds a body may take to arrive."""

    max_body_bytes: int = 65536
    max_question_chars: int = 8000
    max_question_tokens: int = 1024
    body_timeout_s: float = 10.0
    """From the request's headers to its body's last byte: a body not all there by then gets 408."""


def quoted(text: str) -> str:
    """``text`` as a message shows it: quoted, escaped onto one line (surrogates too), cut at 40
    characters."""
    return repr(text[:40]) + ("…" if len(text) > 40 else "")


async def receive_body(
    receive: Callable[[], Awaitable[Mapping[str, Any]]], declared: str | None, limits: Limits
) -> bytes:
    """The whole body of an ASGI request (``receive``: its messages; ``declared``: its Content-Length
    header): 413 when declared or received over ``max_body_bytes`` (chunked bodies are counted as they
    come), 408 when it has not all come ``body_timeout_s`` after the call, 400 when the client left."""
    if (
        declared is not None
        and declared.isascii()
        and declared.isdigit()
        and int(declared) > limits.max_body_bytes
    ):
        raise RequestError(
            413, f"request body is {declared} bytes, over the limit of {limits.max_body_bytes}"
        )
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise RequestError(400, "the client closed the connection before the body ended")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limits.max_body_bytes:
                    raise RequestError(
                        413, f"request body over the limit of {limits.max_body_bytes} bytes (chunked)"
                    )
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        raise RequestError(
            408, f"request body not received within {limits.body_timeout_s:g} s ({size} bytes came)"
        ) from None


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict; 400 for a key given twice (JSON readers disagree on which wins)."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise RequestError(400, f"duplicate key {quoted(key)} in the request body")
        seen[key] = value
    return seen


def bounded_int(digits: str) -> int:
    """A JSON integer, 400 when longer than :data:`MAX_INTEGER_DIGITS`."""
    if len(digits.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise RequestError(400, f"request body holds a {len(digits)}-digit integer (ids are below 2**63)")
    return int(digits)


def unencodable(text: str) -> bool:
    """Whether ``text`` holds a NUL or an unpaired surrogate (which no UTF-8 text can hold)."""
    return "\x00" in text or any(0xD800 <= ord(char) <= 0xDFFF for char in text)


def check_field(key: str, value: Any) -> None:
    """400 unless the field ``key`` is text without NUL or unpaired surrogates, and ``value`` is a
    string, number, boolean or null (no request field holds an array or an object)."""
    if unencodable(key):
        raise RequestError(400, f"field name {quoted(key)} holds a NUL or an unpaired surrogate")
    if isinstance(value, dict | list):
        kind = "an object" if isinstance(value, dict) else "an array"
        raise RequestError(400, f"{quoted(key)} is {kind}: request fields are strings or numbers")
    if isinstance(value, str) and unencodable(value):
        raise RequestError(400, f"{quoted(key)} holds a NUL or an unpaired surrogate (not valid UTF-8 text)")


def read_body(body: bytes, limits: Limits) -> dict[str, Any]:
    """The JSON object of a request body: 413 when over ``max_body_bytes``; 400 when not UTF-8, not JSON,
    nested too deep for the reader, not an object, a key given twice, or a field :func:`check_field`
    refuses."""
    if len(body) > limits.max_body_bytes:
        raise RequestError(
            413, f"request body is {len(body)} bytes, over the limit of {limits.max_body_bytes}"
        )
    try:
        payload = json.loads(body.decode("utf-8"), object_pairs_hook=unique_keys, parse_int=bounded_int)
    except UnicodeDecodeError as error:
        raise RequestError(400, f"request body is not UTF-8 (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise RequestError(400, f"request body is not JSON: {error.msg} at character {error.pos}") from None
    except RecursionError:
        raise RequestError(400, "request body nests arrays or objects too deep to read") from None
    if not isinstance(payload, dict):
        raise RequestError(400, "request body must be a JSON object")
    for key, value in payload.items():
        check_field(key, value)
    return payload


def question_text(payload: Mapping[str, Any], key: str, limits: Limits, count: Callable[[str], int]) -> str:
    """``payload[key]`` as a question: 400 when missing, not text, empty, or over ``max_question_chars`` or
    ``max_question_tokens`` (``count``: the tokenizer's count). ``payload``: a :func:`read_body` result."""
    text = payload.get(key)
    if not isinstance(text, str):
        raise RequestError(400, f"'{key}' must be a string")
    if not text.strip():
        raise RequestError(400, f"'{key}' is empty")
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
    """``POST /v1/answer``'s ``{question, variant?}`` (a :func:`read_body` result) as ``(question, variant
    name)``."""
    unknown = sorted(set(payload) - {"question", "variant"})
    if unknown:
        raise RequestError(400, f"unknown field {quoted(unknown[0])} (fields: question, variant)")
    variant = payload.get("variant", default_variant)
    if not isinstance(variant, str):
        raise RequestError(400, f"'variant' must be a string (one of {', '.join(VARIANTS)})")
    if variant not in VARIANTS:
        raise RequestError(400, f"unknown variant {quoted(variant)} (one of {', '.join(VARIANTS)})")
    return question_text(payload, "question", limits, count), variant


def question_id(value: Any, where: str) -> int:
    """A question id (``where``: what holds it, for the message): a JSON integer or a string of ASCII
    digits, in ``1 .. 2**63 - 1``; else 400."""
    if isinstance(value, str) and ASCII_ID.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 2**63:
        shown = quoted(value) if isinstance(value, str) else json.dumps(value)
        raise RequestError(400, f"{where} must be a positive integer below 2**63 (ASCII digits), not {shown}")
    return value


def answer_text(payload: Mapping[str, Any]) -> str | None:
    """The optional accepted answer: None when not given, 400 when not text."""
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
    (``payload``: a :func:`read_body` result) as a :class:`PoolUpdate` and the answers it sets;
    ``current``: the pool's questions by id (404 for an unknown one, 409 for an id added twice)."""
    allowed = {"add": {"id", "question", "answer"}, "edit": {"question", "answer"}, "delete": set()}[
        operation
    ]
    unknown = sorted(set(payload) - allowed)
    if unknown:
        raise RequestError(400, f"unknown field {quoted(unknown[0])} for {operation}")
    if operation == "add":
        qid = question_id(payload.get("id"), "'id'")
        if qid in current:
            raise RequestError(409, f"question {qid} is already in the pool")
        answer = answer_text(payload)
        text = question_text(payload, "question", limits, count)
        return PoolUpdate(added=((qid, text),)), {qid: answer or ""}
    qid = question_id(qid, "question id")
    if qid not in current:
        raise RequestError(404, f"question {qid} is not in the pool")
    if operation == "delete":
        return PoolUpdate(deleted=(qid,)), {}
    if "question" not in payload and "answer" not in payload:
        raise RequestError(400, "an edit needs 'question' or 'answer'")
    text = question_text(payload, "question", limits, count) if "question" in payload else current[qid]
    answer = answer_text(payload)
    return PoolUpdate(edited=((qid, text),)), ({qid: answer} if answer is not None else {})
