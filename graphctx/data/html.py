"""Stack Exchange post HTML -> plain text that keeps what matters in technical answers.

markdownify does the conversion: ``<pre><code>`` becomes a fenced block, ``<code>`` inline backticks,
lists stay lists, entities are unescaped. On top of it: links keep only their text, images are replaced by
their alt text, and ``<script>``/``<style>`` are dropped with their content.
"""

from __future__ import annotations

import re

from markdownify import MarkdownConverter

_BLANK_RUNS = re.compile(r"\n{3,}")
_URL = re.compile(r"https?://\S+")


class _PostConverter(MarkdownConverter):
    """markdownify with Stack Exchange choices for links, images and executable content."""

    def convert_a(self, el, text, parent_tags):
        return text

    def convert_img(self, el, text, parent_tags):
        alt = (el.attrs.get("alt") or "").strip()
        return f"[image: {alt}]" if alt else ""

    def convert_script(self, el, text, parent_tags):
        return ""

    convert_style = convert_script


class _LinklessConverter(_PostConverter):
    """Drops link text too: what is left is what the author wrote beyond the links."""

    def convert_a(self, el, text, parent_tags):
        return ""


_OPTIONS = {
    "heading_style": "ATX",
    "bullets": "*",
    "code_language": "",
    "escape_underscores": False,
    "escape_asterisks": False,
    "escape_misc": False,
}
_CONVERTER = _PostConverter(**_OPTIONS)
_LINKLESS = _LinklessConverter(**_OPTIONS)


def html_to_text(html: str) -> str:
    """Convert one post body to text: fenced code, inline code, lists, link text, image alt text."""
    text = _CONVERTER.convert(html or "")
    return _BLANK_RUNS.sub("\n\n", text).strip()


def text_outside_links(html: str) -> str:
    """The post's text without links (anchor text and bare URLs): short means a link-only answer."""
    return without_urls(_LINKLESS.convert(html or "")).strip()


def without_urls(text: str) -> str:
    """The text with bare URLs removed."""
    return _URL.sub("", text)
