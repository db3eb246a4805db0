"""Stream a Stack Exchange dump (Posts.xml, PostLinks.xml) and join questions with accepted answers.

Memory stays flat in the file size: rows are parsed one at a time with lxml's ``iterparse`` and freed at
once; questions and answers go to an on-disk SQLite table, and the join streams back out of it ordered by
question id. Only one small integer map lives in memory: the duplicate links of PostLinks.xml.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from lxml import etree

from graphctx.data.dates import canonical, parse_created
from graphctx.data.dumpfiles import LINKS, resolve_dump
from graphctx.errors import DataError

QUESTION, ANSWER = "1", "2"
Post = tuple[
    int,
    str | None,
    int | None,
    int | None,
    str | None,
    str | None,
    str | None,
    str | None,
    int | None,
    str | None,
]
"""A row of the scratch ``post`` table: id, kind, parent, accepted, title, body, tags, created, score,
owner (OwnerUserId)."""
DUPLICATE_LINK = "3"


@dataclass
class RawQuestion:
    """One question joined with its accepted answer (HTML bodies as in the dump; dates canonical ISO)."""

    id: int
    title: str
    body_html: str
    tags: list[str]
    created: str
    score: int
    answer_html: str | None
    answer_created: str | None
    answer_score: int | None
    answer_parent_mismatch: bool = False
    """The AcceptedAnswerId names a post that is not an answer to this question (it is not paired)."""
    duplicate_of: list[int] = field(default_factory=list)
    """Ids this question was closed as a duplicate of (LinkTypeId=3, this post on the PostId side)."""
    duplicate_ids: list[int] = field(default_factory=list)
    """Ids linked to this question as duplicates, in either direction."""


ROOTS = {"Posts.xml": "posts", "PostLinks.xml": "postlinks"}
COMMUNITY_USER = "-1"
FABRICATED_ID_FACTOR = 2
"""A Community-owned question or answer whose Id is more than this many times the largest Id of the dump's
other posts is a fabricated watermark post. Dumps since 2024 carry two, a question and an answer at Ids
near 10^9 (1000000001 and 1000000010), on every site; Stack Overflow's real Ids reach about 8·10^7, so a
factor of 2 separates them (as it does on small sites) until a site passes 5·10^8 posts. Post Ids are
handed out in increasing order, so no real post stands twice as high as every other."""


def is_fabricated(post_id: int, kind: str | None, owner: str | None, largest_other: int) -> bool:
    """Whether a post is a watermark post (:data:`FABRICATED_ID_FACTOR`); ``largest_other``: the largest
    Id of the dump's posts that are not Community-owned questions or answers.

    Examples:
        >>> is_fabricated(1_000_000_001, QUESTION, COMMUNITY_USER, 79_000_000)  # Stack Overflow
        True
        >>> is_fabricated(78_999_999, QUESTION, COMMUNITY_USER, 79_000_000)  # a real Community post
        False
        >>> is_fabricated(1_000_000_010, ANSWER, "42", 79_000_000)  # owned by a user
        False
    """
    return (
        owner == COMMUNITY_USER
        and kind in (QUESTION, ANSWER)
        and largest_other > 0
        and post_id > FABRICATED_ID_FACTOR * largest_other
    )


def iter_rows(stream: IO[bytes], origin: str, root: str) -> Iterator[dict[str, str]]:
    """Yield the attributes of every ``<row>`` of a dump file, freeing each element once read.

    ``root`` is the root element the file must have (``posts``, ``postlinks``): anything else (an HTML page
    saved under the name) is a ``DataError`` naming the element found; so is malformed XML.
    """
    try:
        started = False
        for event, element in etree.iterparse(stream, events=("start", "end"), huge_tree=True):
            if not started:
                started = True
                if element.tag != root:
                    raise DataError(
                        f"{origin}: the root element is <{element.tag}>, not <{root}>: not a Stack Exchange "
                        f"dump file{' (an HTML page saved under its name?)' if element.tag == 'html' else ''}"
                    )
            if event != "end" or element.tag != "row":
                continue
            yield dict(element.attrib)
            element.clear(keep_tail=False)
            while element.getprevious() is not None:
                del element.getparent()[0]
    except etree.XMLSyntaxError as exc:
        line, column = exc.position
        raise DataError(f"{origin}: malformed XML at line {line}, column {column}: {exc.msg}") from exc


def parse_tags(raw: str | None) -> list[str]:
    """Tags from either dump form: ``<a><b>`` (older dumps) or ``|a|b|`` (newer ones)."""
    if not raw:
        return []
    if raw.startswith("<"):
        return [tag for tag in raw.strip("<>").split("><") if tag]
    return [tag for tag in raw.split("|") if tag]


LinkRow = tuple[int, int, str]
"""A PostLinks.xml row as :func:`post_links` yields it: PostId, RelatedPostId, LinkTypeId."""
IGNORED_LINKS = {
    "ignored_self_links": "self-link rows",
    "ignored_malformed_links": "rows without integer ids",
}
"""The PostLinks.xml rows :func:`post_links` skips, by count key."""


def post_links(rows: Iterable[dict[str, str]], ignored: Counter[str]) -> Iterator[LinkRow]:
    """The one reader of PostLinks.xml rows, for the dataset and retrieval-eval alike: ``(PostId,
    RelatedPostId, LinkTypeId)`` of each row. A self-link (PostId = RelatedPostId, which links nothing) is
    skipped and counted in ``ignored["ignored_self_links"]``, a row without integer ids in
    ``ignored["ignored_malformed_links"]``.

    Examples:
        >>> ignored = Counter()
        >>> rows = [{"PostId": "7", "RelatedPostId": "3", "LinkTypeId": "3"},
        ...         {"PostId": "7", "RelatedPostId": "7", "LinkTypeId": "3"}, {"PostId": "x"}]
        >>> list(post_links(rows, ignored)), dict(ignored)
        ([(7, 3, '3')], {'ignored_self_links': 1, 'ignored_malformed_links': 1})
    """
    for row in rows:
        try:
            post, related = int(row["PostId"]), int(row["RelatedPostId"])
        except (KeyError, ValueError):
            ignored["ignored_malformed_links"] += 1
            continue
        if post == related:
            ignored["ignored_self_links"] += 1
            continue
        yield post, related, row.get("LinkTypeId", "")


def read_duplicate_links(
    links: Iterable[LinkRow], duplicate_of: dict[int, list[int]], linked: dict[int, list[int]]
) -> None:
    """Add the duplicate links (LinkTypeId=3) of :func:`post_links` to ``duplicate_of`` (PostId side) and
    ``linked`` (both directions)."""
    for post, related, kind in links:
        if kind != DUPLICATE_LINK:
            continue
        duplicate_of[post].append(related)
        linked[post].append(related)
        linked[related].append(post)


def drop_links(removed: set[int], duplicate_of: dict[int, list[int]], linked: dict[int, list[int]]) -> int:
    """Remove the duplicate links to or from ``removed`` posts from both maps; the number of PostLinks rows
    dropped (``duplicate_of`` holds one entry per row)."""
    dropped = 0
    for links, count in ((duplicate_of, True), (linked, False)):
        for post in list(links):
            kept = [] if post in removed else [other for other in links[post] if other not in removed]
            dropped += (len(links[post]) - len(kept)) * count
            if kept:
                links[post] = kept
            else:
                del links[post]
    return dropped


class DumpReader:
    """Reads one dump into a scratch SQLite file and streams joined questions back out.

    Every post is stored before anything is joined, so the result does not depend on the order of rows in
    the file (an answer may come before its question). A question is paired with the post its
    ``AcceptedAnswerId`` names only when that post is an answer whose ``ParentId`` is this question.
    Duplicate post Ids are refused with a ``DataError`` listing them; a ``CreationDate`` that is not a date
    is a ``DataError`` naming the row and the value.

    Fabricated watermark posts are dropped before the join, with their PostLinks rows: a question or an
    answer owned by the Community user (-1) whose Id exceeds ``FABRICATED_ID_FACTOR`` times the largest Id
    of every other post (:func:`is_fabricated`). Real Community posts (tag wikis, migrated stubs) have Ids
    among the others'; the publisher's watermark posts sit far above them, whatever their exact Ids.

    ``counts`` holds what was seen: ``rows``, ``questions``, ``answers``, ``other_posts``,
    ``skipped_rows`` (a question without Id, Title, Body or CreationDate), ``removed_fabricated``,
    ``removed_fabricated_links`` (duplicate-link rows to or from them), ``with_accepted_answer``, and the
    PostLinks.xml rows ignored (:data:`IGNORED_LINKS`);
    ``span`` the first and last CreationDate of all posts.
    """

    def __init__(self, dump: str | Path, scratch: Path) -> None:
        self.files = resolve_dump(dump)
        self.posts = self.files.posts
        self.scratch = scratch
        self.counts: Counter[str] = Counter()
        self.first_post: str | None = None
        self.last_post: str | None = None
        self._largest_other = 0

    def questions(self) -> Iterator[RawQuestion]:
        """Every well-formed question in id order, with its accepted answer when the dump holds it."""
        duplicate_of: dict[int, list[int]] = defaultdict(list)
        linked: dict[int, list[int]] = defaultdict(list)
        db = sqlite3.connect(self.scratch / "posts.sqlite")
        try:
            db.execute(
                "CREATE TABLE post (id INTEGER PRIMARY KEY, kind TEXT, parent INTEGER, accepted INTEGER,"
                " title TEXT, body TEXT, tags TEXT, created TEXT, score INTEGER, owner TEXT)"
            )
            for name, stream in self.files.members():  # one pass, in the order the files are stored
                origin = str(self.files.links if name == LINKS else self.posts)
                rows = iter_rows(stream, origin, ROOTS[name])
                if name == LINKS:
                    read_duplicate_links(post_links(rows, self.counts), duplicate_of, linked)
                else:
                    self._load(db, rows)
            removed = self._drop_fabricated(db)
            self.counts["removed_fabricated_links"] += drop_links(removed, duplicate_of, linked)
            yield from self._join(db, duplicate_of, linked)
        finally:
            db.close()

    def _load(self, db: sqlite3.Connection, rows: Iterator[dict[str, str]]) -> None:
        duplicates: list[int] = []  # the first 20 seen (a dump appended twice repeats every Id)
        repeated = 0
        for row in rows:
            self.counts["rows"] += 1
            kind = row.get("PostTypeId")
            post_id = _int(row.get("Id"))
            if kind == QUESTION:
                values = self._question(row, post_id)
            elif kind == ANSWER:
                self.counts["answers"] += 1
                values = self._answer(row, post_id)
            else:
                self.counts["other_posts"] += 1
                values = (
                    None
                    if post_id is None
                    else (post_id, kind, None, None, None, None, None, None, None, row.get("OwnerUserId"))
                )
            if values is None:
                continue
            if kind not in (QUESTION, ANSWER) or values[-1] != COMMUNITY_USER:
                self._largest_other = max(self._largest_other, values[0])
            if values[7] is not None:
                self.first_post = values[7] if self.first_post is None else min(self.first_post, values[7])
                self.last_post = values[7] if self.last_post is None else max(self.last_post, values[7])
            if db.execute("INSERT OR IGNORE INTO post VALUES (?,?,?,?,?,?,?,?,?,?)", values).rowcount == 0:
                repeated += 1
                if len(duplicates) < 20:
                    duplicates.append(post_id)
        db.commit()
        if repeated:
            shown = ", ".join(map(str, sorted(duplicates)))
            more = f" and {repeated - len(duplicates)} more" if repeated > len(duplicates) else ""
            raise DataError(
                f"{self.posts}: duplicate post Ids {shown}{more}: each Id must name one row "
                "(a dump concatenated or appended twice?)"
            )

    def _drop_fabricated(self, db: sqlite3.Connection) -> set[int]:
        """Delete the watermark posts (:func:`is_fabricated`), count them as ``removed_fabricated``, and
        return their Ids."""
        if not self._largest_other:
            return set()
        where = "FROM post WHERE owner = ? AND kind IN (?, ?) AND id > ?"
        values = (COMMUNITY_USER, QUESTION, ANSWER, FABRICATED_ID_FACTOR * self._largest_other)
        removed = {post_id for (post_id,) in db.execute(f"SELECT id {where}", values)}
        db.execute(f"DELETE {where}", values)
        db.commit()
        self.counts["removed_fabricated"] += len(removed)
        return removed

    def _question(self, row: dict[str, str], post_id: int | None) -> Post | None:
        """The stored values of a question row; ``None`` when it is skipped."""
        if post_id is None or not all(row.get(key) for key in ("Title", "Body", "CreationDate")):
            self.counts["skipped_rows"] += 1
            return None
        self.counts["questions"] += 1
        return (
            post_id,
            QUESTION,
            None,
            _int(row.get("AcceptedAnswerId")),
            row["Title"],
            row["Body"],
            row.get("Tags"),
            self._date(row["CreationDate"], post_id),
            _int(row.get("Score")) or 0,
            row.get("OwnerUserId"),
        )

    def _answer(self, row: dict[str, str], post_id: int | None) -> Post | None:
        """The stored values of an answer row; ``None`` without an Id."""
        if post_id is None:
            return None
        created = row.get("CreationDate")
        return (
            post_id,
            ANSWER,
            _int(row.get("ParentId")),
            None,
            None,
            row.get("Body"),
            None,
            self._date(created, post_id) if created else None,
            _int(row.get("Score")),
            row.get("OwnerUserId"),
        )

    def _date(self, value: str, post_id: int) -> str:
        try:
            return canonical(parse_created(value))
        except ValueError as exc:
            raise DataError(f"{self.posts}: row Id={post_id}: CreationDate {value!r}: {exc}") from exc

    def _join(
        self, db: sqlite3.Connection, duplicate_of: dict[int, list[int]], linked: dict[int, list[int]]
    ) -> Iterator[RawQuestion]:
        rows = db.execute(
            "SELECT q.id, q.title, q.body, q.tags, q.created, q.score, a.id, a.kind, a.parent, a.body,"
            " a.created, a.score FROM post q LEFT JOIN post a ON a.id = q.accepted"
            " WHERE q.kind = ? ORDER BY q.id",
            (QUESTION,),
        )
        for qid, title, body, tags, created, score, aid, kind, parent, a_body, a_created, a_score in rows:
            mismatch = aid is not None and (kind != ANSWER or parent != qid)
            paired = not mismatch and a_body is not None
            self.counts["with_accepted_answer"] += paired
            yield RawQuestion(
                id=qid,
                title=title,
                body_html=body,
                tags=parse_tags(tags),
                created=created,
                score=score,
                answer_html=a_body if paired else None,
                answer_created=a_created if paired else None,
                answer_score=a_score if paired else None,
                answer_parent_mismatch=mismatch,
                duplicate_of=sorted(set(duplicate_of.get(qid, []))),
                duplicate_ids=sorted(set(linked.get(qid, []))),
            )


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
