"""Dump questions -> dataset rows with clean text: the work that runs in the HTML cleaning processes.

Kept light on purpose (markdownify and lxml, no ``datasets``), so each worker process starts fast and small.
"""

from __future__ import annotations

from typing import Any

from graphctx.data.html import html_to_text, text_outside_links
from graphctx.data.stackexchange import RawQuestion
from graphctx.errors import DataError


def question_text(title: str, body: str) -> str:
    """What the model sees as the question: the title, a blank line, the body."""
    return f"{title}\n\n{body}".strip()


def row_from_dump(raw: RawQuestion, site: str) -> tuple[dict[str, Any], str]:
    """A dataset row from a joined dump question, and its answer's text beyond links."""
    body = html_to_text(raw.body_html)
    answer = html_to_text(raw.answer_html or "")
    row = {
        "id": raw.id,
        "site": site,
        "title": raw.title,
        "body": body,
        "question": question_text(raw.title, body),
        "answer": answer,
        "tags": raw.tags,
        "created": raw.created,
        "answer_created": raw.answer_created or "",
        "score": raw.score,
        "answer_score": raw.answer_score or 0,
        "duplicate_ids": raw.duplicate_ids,
    }
    return row, text_outside_links(raw.answer_html or "")


Screened = tuple[str | None, RawQuestion | None]
"""A dump question after the cheap checks: ``(reason, None)`` when rejected, ``(None, question)`` when not."""
Cleaned = tuple[str | None, tuple[dict[str, Any], str] | None]
"""``(reason, None)`` when rejected, or ``(None, (row, answer text beyond links))``."""


def clean_screened(screened: Screened, site: str, origin: str) -> Cleaned:
    """Clean the HTML of a question the cheap checks kept (runs in worker processes).

    Raises ``DataError`` naming ``origin`` (the dump file) and the post id when cleaning fails.
    """
    reason, raw = screened
    if raw is None:
        return reason, None
    try:
        return None, row_from_dump(raw, site)
    except Exception as exc:
        raise DataError(
            f"{origin}: question {raw.id} (or its accepted answer): cannot clean its HTML: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
