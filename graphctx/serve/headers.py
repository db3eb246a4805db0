"""The headers every response of ``graphctx serve`` carries: the page's Content-Security-Policy, which
runs only the page's own inline script and style (each allowed by its SHA-256), and for every response
nosniff, no framing and no referrer.

The page's CSP is ``default-src 'none'`` with ``script-src`` and ``style-src`` the hashes of its inline
blocks, ``connect-src 'self'`` (its ``fetch`` of ``/v1/answer``), ``frame-ancestors 'none'``,
``base-uri 'none'`` and ``form-action 'none'``; other responses get ``default-src 'none';
frame-ancestors 'none'``. FastAPI's ``/docs`` and ``/redoc`` (served only with ``--docs``) load their
scripts from a CDN, so they carry no CSP.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)
"""The page's inline blocks (its tags carry no attributes)."""
EVERY_RESPONSE = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
API_POLICY = "default-src 'none'; frame-ancestors 'none'"
DOCS_PAGES = frozenset({"/docs", "/docs/oauth2-redirect", "/redoc"})


def source_hash(text: str) -> str:
    """A CSP hash source: ``'sha256-<base64 of SHA-256(text as UTF-8)>'``."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


def page_policy(page: str) -> str:
    """The CSP of ``page``: its inline scripts and styles by hash, the rest off."""
    blocks = INLINE.findall(page)
    scripts = " ".join(source_hash(body) for tag, body in blocks if tag == "script") or "'none'"
    styles = " ".join(source_hash(body) for tag, body in blocks if tag == "style") or "'none'"
    return (
        f"default-src 'none'; script-src {scripts}; style-src {styles}; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )


class SecurityHeaders:
    """ASGI middleware: :data:`EVERY_RESPONSE` on each response, ``policy`` (the page's CSP) on ``/``,
    :data:`API_POLICY` on the others but ``docs`` (the API pages asked for, which carry none)."""

    def __init__(self, app: ASGIApp, policy: str, docs: Iterable[str] = ()) -> None:
        self.app = app
        self.policy = policy
        self.docs = frozenset(docs)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        policy = self.policy if path == "/" else None if path in self.docs else API_POLICY

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in EVERY_RESPONSE.items():
                    headers[name] = value
                if policy is not None:
                    headers["Content-Security-Policy"] = policy
            await send(message)

        await self.app(scope, receive, send_with_headers)
