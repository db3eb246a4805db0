"""Stream a Stack Exchange dump (Posts.xml, PostLinks.xml) and join questions with accepted answers.

Memory stays flat in the file size: rows are parsed one at a time with lxml's ``iterparse`` and freed at
once; questions and the answers they accept go to an on-disk SQLite table, and the join streams back out of
it ordered by question id. Only two small integer maps live in memory: the ids of accepted answers
still awaited, and the duplicate links of PostLinks.xml.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lxml import etree

from graphctx.errors import DataError

QUESTION, ANSWER = "1", "2"
DUPLICATE_LINK = "3"


@dataclass
class RawQuestion:
    """One question joined with its accepted answer (HTML bodies as in the dump)."""

    id: int
    title: str
    body_html: str
    tags: list[str]
    created: str
    score: int
    answer_html: str | None
    answer_created: str | None
    answer_score: int | None
    duplicate_of: list[int] = field(default_factory=list)
    """Ids this question was closed as a duplicate of (LinkTypeId=3, this post on the PostId side)."""
    duplicate_ids: list[int] = field(default_factory=list)
    """Ids linked to this question as duplicates, in either direction."""


def resolve_dump(path: str | Path) -> tuple[Path, Path | None]:
    """``(Posts.xml, PostLinks.xml or None)`` for a site folder or a Posts.xml path."""
    path = Path(path)
    posts = path / "Posts.xml" if path.is_dir() else path
    if not posts.is_file():
        raise DataError(
            f"{posts}: not found (expected a Stack Exchange site folder holding Posts.xml, or a Posts.xml)"
        )
    links = posts.with_name("PostLinks.xml")
    return posts, links if links.is_file() else None


def iter_rows(path: Path) -> Iterator[dict[str, str]]:
    """Yield the attributes of every ``<row>`` of a dump file, freeing each element once read."""
    try:
        for _, element in etree.iterparse(str(path), events=("end",), tag="row", huge_tree=True):
            yield dict(element.attrib)
            element.clear(keep_tail=False)
            while element.getprevious() is not None:
                del element.getparent()[0]
    except etree.XMLSyntaxError as exc:
        line, column = exc.position
        raise DataError(f"{path}: malformed XML at line {line}, column {column}: {exc.msg}") from exc


def parse_tags(raw: str | None) -> list[str]:
    """Tags from either dump form: ``<a><b>`` (older dumps) or ``|a|b|`` (newer ones)."""
    if not raw:
        return []
    if raw.startswith("<"):
        return [tag for tag in raw.strip("<>").split("><") if tag]
    return [tag for tag in raw.split("|") if tag]


def read_duplicate_links(path: Path | None) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """``(duplicate_of, duplicate_ids)`` from PostLinks.xml rows with LinkTypeId=3."""
    duplicate_of: dict[int, list[int]] = defaultdict(list)
    linked: dict[int, list[int]] = defaultdict(list)
    if path is None:
        return duplicate_of, linked
    for row in iter_rows(path):
        if row.get("LinkTypeId") != DUPLICATE_LINK:
            continue
        try:
            post, related = int(row["PostId"]), int(row["RelatedPostId"])
        except (KeyError, ValueError):
            continue
        duplicate_of[post].append(related)
        linked[post].append(related)
        linked[related].append(post)
    return duplicate_of, linked


class DumpReader:
    """Reads one dump into a scratch SQLite file and streams joined questions back out.

    ``counts`` holds what was seen: ``rows``, ``questions``, ``answers``, ``other_posts``,
    ``skipped_rows`` (a row without Id, Title, Body or CreationDate), ``with_accepted_answer``.
    """

    def __init__(self, dump: str | Path, scratch: Path) -> None:
        self.posts, self.links = resolve_dump(dump)
        self.scratch = scratch
        self.counts: Counter[str] = Counter()

    def questions(self) -> Iterator[RawQuestion]:
        """Every well-formed question in id order, with its accepted answer when the dump holds it."""
        duplicate_of, linked = read_duplicate_links(self.links)
        db = sqlite3.connect(self.scratch / "posts.sqlite")
        try:
            self._load(db)
            yield from self._join(db, duplicate_of, linked)
        finally:
            db.close()

    def _load(self, db: sqlite3.Connection) -> None:
        db.execute(
            "CREATE TABLE q (id INTEGER PRIMARY KEY, accepted INTEGER, title TEXT, body TEXT,"
            " tags TEXT, created TEXT, score INTEGER)"
        )
        db.execute("CREATE TABLE a (id INTEGER PRIMARY KEY, body TEXT, created TEXT, score INTEGER)")
        awaited: set[int] = set()
        for row in iter_rows(self.posts):
            self.counts["rows"] += 1
            kind = row.get("PostTypeId")
            if kind == QUESTION:
                self._load_question(db, row, awaited)
            elif kind == ANSWER:
                self.counts["answers"] += 1
                answer_id = _int(row.get("Id"))
                if answer_id in awaited and "Body" in row:
                    awaited.discard(answer_id)
                    db.execute(
                        "INSERT OR IGNORE INTO a VALUES (?,?,?,?)",
                        (answer_id, row["Body"], row.get("CreationDate"), _int(row.get("Score"))),
                    )
            else:
                self.counts["other_posts"] += 1
        db.commit()

    def _load_question(self, db: sqlite3.Connection, row: dict[str, str], awaited: set[int]) -> None:
        question_id = _int(row.get("Id"))
        if question_id is None or not all(row.get(key) for key in ("Title", "Body", "CreationDate")):
            self.counts["skipped_rows"] += 1
            return
        self.counts["questions"] += 1
        accepted = _int(row.get("AcceptedAnswerId"))
        if accepted is not None:
            awaited.add(accepted)
        db.execute(
            "INSERT OR IGNORE INTO q VALUES (?,?,?,?,?,?,?)",
            (
                question_id,
                accepted,
                row["Title"],
                row["Body"],
                row.get("Tags"),
                row["CreationDate"],
                _int(row.get("Score")) or 0,
            ),
        )

    def _join(
        self, db: sqlite3.Connection, duplicate_of: dict[int, list[int]], linked: dict[int, list[int]]
    ) -> Iterator[RawQuestion]:
        rows = db.execute(
            "SELECT q.id, q.title, q.body, q.tags, q.created, q.score, a.body, a.created,"
            " a.score FROM q LEFT JOIN a ON a.id = q.accepted ORDER BY q.id"
        )
        for qid, title, body, tags, created, score, a_body, a_created, a_score in rows:
            if a_body is not None:
                self.counts["with_accepted_answer"] += 1
            yield RawQuestion(
                id=qid,
                title=title,
                body_html=body,
                tags=parse_tags(tags),
                created=created,
                score=score,
                answer_html=a_body,
                answer_created=a_created,
                answer_score=a_score,
                duplicate_of=sorted(set(duplicate_of.get(qid, []))),
                duplicate_ids=sorted(set(linked.get(qid, []))),
            )


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
