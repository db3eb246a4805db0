"""Ground truth for retrieval from a dump's own links: PostLinks.xml, both link types, graded.

A Stack Exchange dump records two kinds of links between questions in ``PostLinks.xml``: *linked*
(``LinkTypeId`` 1, a post or one of its answers cites the other question) and *duplicate* (3, the
``PostId`` question was closed as a duplicate of ``RelatedPostId``). Both are read here, in either
direction, into graded relevance: duplicate = 2, linked = 1, the larger where a pair has both.

The rows come from the one PostLinks.xml reader, :func:`graphctx.data.stackexchange.post_links`, as the
dataset's do (self-links and rows without ids skipped and counted the same way), of the site's own
PostLinks.xml only (the folder of its Posts.xml, :meth:`~graphctx.data.dumpfiles.DumpFiles.members`).
What is kept differs (:mod:`graphctx.data.stackexchange` keeps only duplicates,
and ``filters.drop_linked_duplicates`` removes closed duplicates from the splits): the link evidence stays
even for questions the dataset filters drop, and their text comes from Posts.xml with the dataset's own
cleaning (:func:`graphctx.data.cleaning.question_text` of :func:`graphctx.data.html.html_to_text`).
Both files are streamed (site folders and ``.7z`` archives alike); only linked questions are kept.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from graphctx.data.cleaning import question_text
from graphctx.data.dates import canonical, parse_created
from graphctx.data.dumpfiles import LINKS, POSTS, DumpFiles, resolve_dump
from graphctx.data.html import html_to_text
from graphctx.data.stackexchange import (
    ANSWER,
    COMMUNITY_USER,
    QUESTION,
    ROOTS,
    LinkRow,
    is_fabricated,
    iter_rows,
    post_links,
)
from graphctx.errors import DataError

GRADES = {"1": 1, "3": 2}
"""``LinkTypeId`` -> relevance grade: linked (1) = 1, duplicate (3) = 2."""

Grades = dict[int, dict[int, int]]
"""post id -> {linked post id: grade}, symmetric."""


@dataclass(frozen=True)
class LinkedQuestion:
    """A question that has at least one link, as Posts.xml holds it."""

    id: int
    title: str
    body_html: str
    created: str
    """Canonical ISO creation time (:func:`graphctx.data.dates.canonical`)."""


@dataclass
class DumpLinks:
    """What :func:`read_dump_links` found: the graded links and the linked questions' text."""

    grades: Grades
    questions: dict[int, LinkedQuestion]
    answer_parent: dict[int, int]
    """Answer id -> its question, for answers of linked questions (``/a/<id>`` URLs point at them)."""
    links_file: Path
    rows: int
    """PostLinks.xml rows of either link type."""
    fabricated_links: int = 0
    """Linked pairs dropped because one side is a watermark post
    (:func:`graphctx.data.stackexchange.is_fabricated`)."""
    ignored: Counter[str] = field(default_factory=Counter)
    """PostLinks.xml rows the one reader skipped (:data:`~graphctx.data.stackexchange.IGNORED_LINKS`)."""


def add_link(grades: Grades, link: LinkRow) -> bool:
    """Add one link of :func:`~graphctx.data.stackexchange.post_links` to ``grades`` (both directions, the
    larger grade kept); False when it is of another link type.

    Examples:
        >>> grades = {}
        >>> add_link(grades, (7, 3, "1"))
        True
        >>> add_link(grades, (3, 7, "3"))
        True
        >>> grades
        {7: {3: 2}, 3: {7: 2}}
    """
    post, related, kind = link
    grade = GRADES.get(kind)
    if grade is None:
        return False
    for a, b in ((post, related), (related, post)):
        neighbours = grades.setdefault(a, {})
        neighbours[b] = max(neighbours.get(b, 0), grade)
    return True


def require_links(files: DumpFiles) -> Path:
    """The dump's PostLinks.xml; a ``DataError`` naming the dump when it has none."""
    if files.links is None:
        where = files.archive or files.posts.parent
        raise DataError(
            f"{where}: no PostLinks.xml: retrieval-eval takes its ground truth from the dump's links "
            "(duplicate and linked questions); use the site's full dump"
        )
    return files.links


def read_dump_links(source: str | Path) -> DumpLinks:
    """Stream the dump at ``source`` (folder, Posts.xml or ``.7z``): every link of type 1 or 3, and the
    title, body and date of each linked question. A dump without PostLinks.xml is a ``DataError``."""
    files = resolve_dump(source)
    require_links(files)
    grades: Grades = {}
    found = DumpLinks(grades, {}, {}, files.links, 0)
    links_read = posts_skipped = False
    for name, stream in files.members():
        if name == LINKS:
            rows = iter_rows(stream, str(files.links), ROOTS[name])
            found.rows = sum(add_link(grades, link) for link in post_links(rows, found.ignored))
            links_read = True
        elif links_read:
            _read_linked_posts(iter_rows(stream, str(files.posts), ROOTS[name]), found)
        else:
            posts_skipped = True  # an archive storing Posts.xml first: read it again once the links are in
    if posts_skipped and grades:
        _read_linked_posts(_posts_rows(files), found)
    return found


def _posts_rows(files: DumpFiles) -> Iterator[dict[str, str]]:
    """Posts.xml's rows again (a second pass, for archives holding Posts.xml first)."""
    for name, stream in files.members():
        if name == POSTS:
            yield from iter_rows(stream, str(files.posts), ROOTS[POSTS])


def _read_linked_posts(rows: Iterator[dict[str, str]], found: DumpLinks) -> None:
    """Keep the questions ``found.grades`` names (with Title, Body, CreationDate) and their answers' ids;
    drop the links of watermark posts (:func:`_drop_fabricated`)."""
    answers: dict[int, int] = {}
    largest_other, community = 0, set()
    for row in rows:
        kind, post = row.get("PostTypeId"), _int(row.get("Id"))
        if post is None:
            continue
        if row.get("OwnerUserId") == COMMUNITY_USER and kind in (QUESTION, ANSWER):
            community.add(post)  # a watermark post or a real one: known once every Id is seen
        else:
            largest_other = max(largest_other, post)
        if kind == ANSWER:
            parent = _int(row.get("ParentId"))
            if parent is not None:
                answers[post] = parent
        elif kind == QUESTION and post in found.grades:
            title, body, created = row.get("Title"), row.get("Body"), row.get("CreationDate")
            if title and body and created:
                try:
                    moment = canonical(parse_created(created))
                except ValueError as exc:
                    raise DataError(f"{found.links_file.with_name(POSTS)}: row Id={post}: {exc}") from exc
                found.questions[post] = LinkedQuestion(post, title, body, moment)
    _drop_fabricated(
        found, {p for p in community if is_fabricated(p, QUESTION, COMMUNITY_USER, largest_other)}
    )
    found.answer_parent = {a: q for a, q in answers.items() if q in found.questions}


def _drop_fabricated(found: DumpLinks, fabricated: set[int]) -> None:
    """Remove the watermark posts' links and question text, counting the linked pairs removed."""
    for post in fabricated & set(found.grades):
        for other in found.grades.pop(post):
            neighbours = found.grades[other]
            del neighbours[post]
            found.fabricated_links += 1
            if not neighbours:
                del found.grades[other]
        found.questions.pop(post, None)


_ANCHOR = re.compile(r"<a\b[^>]*?href\s*=\s*[\"']([^\"']*)[\"'][^>]*>.*?</a\s*>", re.IGNORECASE | re.DOTALL)
_BARE_URL = re.compile(r"https?://[^\s<>\"']+")
_QUESTION_PATH = re.compile(r"/(?:questions|q)/(\d+)")
_ANSWER_PATH = re.compile(r"/a/(\d+)")


def linked_post(url: str, answer_parent: Mapping[int, int]) -> int | None:
    """The question a site URL points at (``/questions/<id>``, ``/q/<id>``, or ``/a/<id>`` of an answer).

    Examples:
        >>> linked_post("https://cardano.stackexchange.com/questions/279/how-to-stake", {})
        279
        >>> linked_post("https://cardano.stackexchange.com/a/5001", {5001: 279})
        279
        >>> linked_post("https://example.com/docs", {}) is None
        True
    """
    match = _QUESTION_PATH.search(url)
    if match:
        return int(match.group(1))
    match = _ANSWER_PATH.search(url)
    return answer_parent.get(int(match.group(1))) if match else None


def mask_links(html: str, targets: set[int], answer_parent: Mapping[int, int]) -> str:
    """``html`` without the anchors (text included) and bare URLs that point at one of ``targets``: a link
    names its target by title or URL slug, which would hand the answer to any lexical ranker.

    Examples:
        >>> html = '<p>See <a href="https://s.com/questions/9/fix-sync">Fix sync</a>, or https://s.com/q/9</p>'
        >>> mask_links(html, {9}, {})
        '<p>See , or </p>'
        >>> mask_links(html, {8}, {}) == html
        True
    """

    def drop(match: re.Match[str], url_group: int) -> str:
        return "" if linked_post(match.group(url_group), answer_parent) in targets else match.group(0)

    html = _ANCHOR.sub(lambda m: drop(m, 1), html)
    return _BARE_URL.sub(lambda m: drop(m, 0), html)


def linked_question_text(
    links: DumpLinks, post: int, mask: bool = True, targets: Collection[int] | None = None
) -> str:
    """The question's text as the dataset cleans it (title, blank line, body); with ``mask``, links to
    ``targets`` (default: the posts it is linked with) removed first (:func:`mask_links`)."""
    question = links.questions[post]
    html = question.body_html
    if mask:
        found = set(links.grades.get(post, {})) if targets is None else set(targets)
        html = mask_links(html, found, links.answer_parent)
    return question_text(question.title, html_to_text(html))


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class LinkQuery:
    """A question evaluated against its links: the pool questions it links to, graded."""

    id: int
    text: str
    created: str
    relevant: dict[int, int]
    """Pool question id -> grade (2 duplicate, 1 linked)."""
    in_split: bool
    """Whether the dataset's filters kept it (a row of the evaluated split) or only the dump holds it."""


def link_queries(
    links: DumpLinks,
    pool_created: Mapping[int, str],
    start: str,
    end: str | None,
    split_ids: Collection[int] = (),
    mask: bool = True,
) -> list[LinkQuery]:
    """Every linked question created in ``[start, end)`` (canonical ISO times; ``end`` None: no bound)
    that links, in either direction, to a pool question created before it; in id order.

    ``pool_created`` maps the pool's ids to their creation times; ``split_ids`` are the evaluated split's
    rows (recorded as ``in_split``). The text is :func:`linked_question_text` (``mask``: links removed).

    Examples:
        >>> q = {i: LinkedQuestion(i, f"T{i}", "<p>b</p>", f"2021-0{i}-01") for i in (1, 2, 5)}
        >>> links = DumpLinks({5: {1: 2, 2: 1}, 1: {5: 2}, 2: {5: 1}}, q, {}, Path("PostLinks.xml"), 2)
        >>> [(x.id, x.relevant) for x in link_queries(links, {1: "2021-01-01"}, "2021-03-01", None)]
        [(5, {1: 2})]
    """
    queries = []
    for post in sorted(links.questions):
        created = links.questions[post].created
        if created < start or (end is not None and created >= end):
            continue
        relevant = {
            other: grade
            for other, grade in sorted(links.grades.get(post, {}).items())
            if other != post and other in pool_created and pool_created[other] < created
        }
        text = linked_question_text(links, post, mask)
        if relevant and text.strip():
            queries.append(LinkQuery(post, text, created, relevant, post in split_ids))
    return queries
