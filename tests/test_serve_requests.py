"""graphctx serve's request readers (graphctx.serve.requests), called as the server calls them (the body
read, then turned into an answer request or a pool update): every malformed body, field and id is refused
with a 4xx and one line naming what is wrong (never another exception, never an update), and the body
receiver answers 413 to a chunked body over the limit and 408 to a stalled one. Fuzzed with Hypothesis
(``derandomize=True``: the same examples on every run); tests/test_serve.py sends the same malformed
requests to a real server."""

from __future__ import annotations

import asyncio
import json
import sys
import unicodedata
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphctx.serve.requests import (
    Limits,
    RequestError,
    answer_request,
    question_id,
    read_body,
    receive_body,
    write_request,
)

LIMITS = Limits(max_question_tokens=200)
POOL = {1: "How do I stake?", 3: "Why is my wallet empty?", 33: "What is an epoch?"}
"""The pool the writes are checked against: ``٣`` or ``３３`` read as digits would edit 3 or 33."""
NON_ASCII_DIGITS = [
    chr(code)
    for code in range(sys.maxunicode + 1)
    if not chr(code).isascii() and (unicodedata.category(chr(code)) == "Nd" or chr(code).isdigit())
]
"""Every character Python calls a digit but ASCII's ten: category Nd (``٣``, ``３``, ``߃``, …) and the
other ``str.isdigit`` ones (``²``, ``①``, …)."""
ZEROS = [
    char for char in NON_ASCII_DIGITS if unicodedata.category(char) == "Nd" and unicodedata.decimal(char) == 0
]
"""The zero of each non-ASCII decimal digit system (Nd digits come in runs of ten from their zero)."""
FIELDS = {
    "answer": ("question", "variant"),
    "add": ("id", "question", "answer"),
    "edit": ("question", "answer"),
}
VALID = {
    "answer": {"question": "How do I delegate my ADA?", "variant": "GraphContextGen"},
    "add": {"id": 99, "question": "How do I delegate my ADA?", "answer": "From the wallet."},
    "edit": {"question": "How do I delegate my ADA?", "answer": "From the wallet."},
}


def handled(kind: str, body: bytes, qid: str, count) -> Any:
    """What the server does with ``body`` for ``kind`` (answer, add, edit, delete: its body is not read;
    ``qid``: the path's id)."""
    payload = read_body(body, LIMITS) if kind != "delete" else {}
    if kind == "answer":
        return answer_request(payload, LIMITS, count, "GraphContextGen")
    return write_request(kind, payload, qid, POOL, LIMITS, count)


def refusal(kind: str, body: bytes, qid: str, count) -> RequestError:
    """The refusal of a malformed request: a 4xx whose message is one line a JSON response can carry."""
    with pytest.raises(RequestError) as caught:
        handled(kind, body, qid, count)
    error = caught.value
    assert 400 <= error.status < 500 and "\n" not in error.message, error.message
    json.dumps({"detail": error.message}, ensure_ascii=False).encode("utf-8")  # as the response writes it
    return error


def encoded(pairs: list[tuple[str, Any]]) -> bytes:
    """A JSON object of ``pairs`` (keys may repeat) as json.dumps writes text: surrogates as ``\\udxxx``."""
    return ("{" + ", ".join(f"{json.dumps(key)}: {json.dumps(value)}" for key, value in pairs) + "}").encode()


def in_digits(number: int, zero: str) -> str:
    """``number`` written in the digit system of ``zero`` (``int()`` reads it back as ``number``)."""
    return "".join(chr(ord(zero) + int(digit)) for digit in str(number))


@pytest.fixture(scope="module")
def count(smollm2_tokenizer):
    return lambda text: len(smollm2_tokenizer(text, add_special_tokens=False)["input_ids"])


DEEP = b"[" * 30000 + b"]" * 30000


@pytest.mark.parametrize(
    ("kind", "body", "qid", "status", "message"),
    [
        ("answer", b'{"question": ' + DEEP + b"}", "", 400, "nests arrays or objects too deep"),
        ("add", b'{"id": 5, "question": ' + DEEP + b"}", "", 400, "nests arrays or objects too deep"),
        ("answer", b'{"question": [["x"]]}', "", 400, "'question' is an array"),
        ("answer", b'{"question": "ok?", "variant": ["GraphContextGen"]}', "", 400, "'variant' is an array"),
        ("answer", b'{"question": "ok?", "variant": {"a": 1}}', "", 400, "'variant' is an object"),
        ("answer", b'{"question": "ok?", "variant": 5}', "", 400, "'variant' must be a string"),
        ("answer", b'{"question": "ok?", "variant": null}', "", 400, "'variant' must be a string"),
        ("answer", b'{"question": "\\ud800"}', "", 400, "'question' holds a NUL or an unpaired surrogate"),
        ("answer", b'{"question": "ok?", "variant": "\\udfff"}', "", 400, "'variant' holds a NUL"),
        ("answer", b'{"question": "ok?", "\\ud800": 1}', "", 400, "field name '\\ud800' holds"),
        ("add", b'{"id": 9, "question": "ok?", "answer": "\\ud800"}', "", 400, "'answer' holds a NUL"),
        ("add", b'{"id": 9, "question": "ok?", "answer": "a\\u0000b"}', "", 400, "'answer' holds a NUL"),
        ("add", b'{"id": "\\udc00", "question": "ok?"}', "", 400, "'id' holds a NUL"),
        ("edit", b'{"answer": "\\ud83d"}', "3", 400, "'answer' holds a NUL"),
        ("edit", b'{"title": "\\ud83d"}', "3", 400, "'title' holds a NUL"),
        ("answer", b'{"question": "a", "question": "b"}', "", 400, "duplicate key 'question'"),
        ("edit", b'{"answer": "a", "answer": "b"}', "3", 400, "duplicate key 'answer'"),
        ("add", b'{"id": 1' + b"0" * 5000 + b', "question": "ok?"}', "", 400, "5001-digit integer"),
        ("add", b'{"id": -1' + b"0" * 5000 + b', "question": "ok?"}', "", 400, "5002-digit integer"),
        ("add", '{"id": "٩٩", "question": "ok?"}'.encode(), "", 400, "'id' must be a positive integer"),
        ("add", '{"id": "３３", "question": "ok?"}'.encode(), "", 400, "not '３３'"),
        ("add", b'{"id": 99.0, "question": "ok?"}', "", 400, "'id' must be a positive integer"),
        ("add", b'{"id": true, "question": "ok?"}', "", 400, "not true"),
        ("add", b'{"id": 9223372036854775808, "question": "ok?"}', "", 400, "below 2**63"),
        ("edit", b'{"answer": "edited"}', "٣", 400, "question id must be a positive integer"),
        ("edit", b'{"answer": "edited"}', "３３", 400, "not '３３'"),
        ("delete", b"", "²", 400, "not '²'"),
        ("delete", b"", "+3", 400, "not '+3'"),
        ("delete", b"", "3\n", 400, "not '3\\n'"),
        ("delete", b"", "9" * 5000, 400, "question id must be a positive integer"),
    ],
)
def test_malformed_requests_are_refused_naming_the_field(count, kind, body, qid, status, message):
    error = refusal(kind, body, qid, count)
    assert error.status == status and message in error.message, error.message


def test_ids_are_ascii_digits_or_json_integers_only():
    """Every non-ASCII digit character, alone, doubled or after an ASCII digit, and each pool id written
    in each other digit system (which ``int()`` reads as that id), is refused as an id; ASCII digits and
    JSON integers are read."""
    assert len(NON_ASCII_DIGITS) > 700 and len(ZEROS) > 60  # Unicode 15: 650 Nd, 128 more isdigit
    written = [in_digits(qid, zero) for qid in POOL for zero in ZEROS]
    assert all(int(text) in POOL for text in written)
    for text in written + [t for digit in NON_ASCII_DIGITS for t in (digit, digit * 2, "1" + digit)]:
        with pytest.raises(RequestError, match="must be a positive integer") as caught:
            question_id(text, "question id")
        assert caught.value.status == 400
    assert question_id("0042", "question id") == 42 and question_id(2**63 - 1, "'id'") == 2**63 - 1


json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(exclude_categories=()), max_size=20)  # surrogates and NUL included
    | st.sampled_from(NON_ASCII_DIGITS)
)
json_values = st.recursive(
    json_leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    kind=st.sampled_from(["answer", "add", "edit", "delete"]),
    body=json_values.map(lambda value: json.dumps(value).encode())
    | st.dictionaries(st.sampled_from(["id", "question", "answer", "variant"]), json_values).map(
        lambda value: json.dumps(value).encode()
    )
    | st.binary(max_size=64),
    qid=st.sampled_from(["1", "3", "33", "4"]) | st.text(max_size=4),
)
def test_fuzzed_bodies_are_read_or_refused_with_a_4xx(count, kind, body, qid):
    """Arbitrary JSON (any depth, text with surrogates and NUL, big integers, NaN), arbitrary bytes: each
    becomes a request or a 4xx refusal, never another exception."""
    try:
        handled(kind, body, qid, count)
    except RequestError:
        refusal(kind, body, qid, count)


@st.composite
def malformed_requests(draw: st.DrawFn, ids: Sequence[int] = tuple(POOL)) -> tuple[str, bytes, str]:
    """``(kind, body, path id)``: a valid request with one defect drawn: an unencodable text in any field
    (or a field's name), a field of the wrong type, an id of non-ASCII digits (body or path: one of the
    pool's ``ids`` in another digit system, or any such digits), a key given twice, an array nested 1 to
    30000 deep (a delete's defect: its id)."""
    kind = draw(st.sampled_from(["answer", "add", "edit", "delete"]))
    pairs = list(VALID.get(kind, {}).items())
    qid = str(draw(st.sampled_from(ids))) if kind in ("edit", "delete") else ""
    if draw(st.booleans()):
        digits = in_digits(draw(st.sampled_from(ids)), draw(st.sampled_from(ZEROS)))
    else:
        digits = draw(st.text(st.sampled_from(NON_ASCII_DIGITS), min_size=1, max_size=3))
    bad_text = draw(st.text(min_size=0, max_size=6)) + draw(
        st.sampled_from(["\x00", *map(chr, range(0xD800, 0xE000, 0x3F))])
    )
    defects = ["unencodable", "name", "duplicate", "deep", "digits", "wrong type"]
    defect = draw(st.sampled_from(defects if kind != "delete" else ["digits"]))
    if defect == "digits" and kind in ("answer", "add"):  # an answer has no id: its body gets one
        pairs = [(key, value) for key, value in pairs if key != "id"] + [("id", digits)]
    elif defect == "digits":
        qid = digits
    elif defect == "unencodable":
        at = draw(st.integers(0, len(pairs) - 1))
        pairs[at] = (pairs[at][0], bad_text)
    elif defect == "name":
        pairs.append((bad_text, draw(json_leaves)))
    elif defect == "wrong type":  # ids: the digits defect; an answer of null is no answer
        field = draw(st.sampled_from([field for field in FIELDS[kind] if field != "id"]))
        wrong = draw(json_values.filter(lambda value: not isinstance(value, str) and value is not None))
        pairs = [(key, value) for key, value in pairs if key != field] + [(field, wrong)]
    elif defect == "duplicate":
        key = draw(st.sampled_from([key for key, _ in pairs]))
        pairs += [(key, draw(json_leaves)), (key, draw(json_leaves))]
    body = encoded(pairs)
    if defect == "deep":
        depth = draw(st.integers(1, 30000))
        body = body[:-1] + b', "x": ' + b"[" * depth + b"]" * depth + b"}"
    return kind, body, qid


@settings(max_examples=300, deadline=None, derandomize=True)
@given(request=malformed_requests())
def test_fuzzed_malformed_requests_are_all_refused(count, request):
    """No malformed request becomes an answer request or a pool update, whatever its defect."""
    kind, body, qid = request
    refusal(kind, body, qid, count)


def test_a_valid_request_of_each_kind_is_read(count):
    """The requests the fuzz breaks are good before it does."""
    assert handled("answer", encoded(list(VALID["answer"].items())), "", count)[1] == "GraphContextGen"
    update, answers = handled("add", encoded(list(VALID["add"].items())), "", count)
    assert update.added == ((99, VALID["add"]["question"]),) and answers == {99: "From the wallet."}
    update, _ = handled("edit", encoded(list(VALID["edit"].items())), "3", count)
    assert update.edited == ((3, VALID["edit"]["question"]),)
    assert handled("delete", b"", "33", count)[0].deleted == (33,)


def received(chunks: list[bytes], stalls: bool, limits: Limits) -> bytes:
    """:func:`receive_body` over ASGI messages of ``chunks`` (``more_body`` until the last one, unless
    ``stalls``: then after the last the client sends nothing more)."""
    messages = [
        {"type": "http.request", "body": chunk, "more_body": stalls or n < len(chunks) - 1}
        for n, chunk in enumerate(chunks)
    ]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await asyncio.Event().wait()  # the stalled client: nothing comes (the event is never set)
        return {"type": "http.disconnect"}

    return asyncio.run(receive_body(receive, None, limits))


@settings(max_examples=120, deadline=None, derandomize=True)
@given(chunks=st.lists(st.binary(max_size=300), min_size=1, max_size=8), stalls=st.booleans())
def test_fuzzed_chunked_and_stalled_bodies(chunks, stalls):
    """A chunked body is received whole, 413 as soon as it passes the limit, 408 when it stalls."""
    limits = Limits(max_body_bytes=600, body_timeout_s=0.05)
    total = sum(map(len, chunks))
    if total > limits.max_body_bytes:
        with pytest.raises(RequestError, match="over the limit of 600 bytes") as caught:
            received(chunks, stalls, limits)
        assert caught.value.status == 413
    elif stalls:
        with pytest.raises(RequestError, match=r"not received within 0\.05 s") as caught:
            received(chunks, stalls, limits)
        assert caught.value.status == 408
    else:
        assert received(chunks, stalls, limits) == b"".join(chunks)


def test_a_declared_length_over_the_limit_is_refused_before_the_body():
    async def receive() -> dict[str, Any]:
        raise AssertionError("the body was read")

    with pytest.raises(RequestError, match="is 70000 bytes, over the limit of 65536"):
        asyncio.run(receive_body(receive, "70000", Limits()))
