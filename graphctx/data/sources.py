"""Reading a dataset source (a Stack Exchange dump, a tabular file or ``hf:owner/name``): that it exists
(:func:`check_source`), what its cache key holds (:func:`source_fingerprint`), and its questions as
filter candidates in source order (:func:`candidates`), with what was read recorded (:class:`SourceRead`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from graphctx.cache import file_digest
from graphctx.data.cleaning import Cleaned, Screened, clean_screened
from graphctx.data.dumpfiles import resolve_dump
from graphctx.data.filters import QuestionFilter
from graphctx.data.html import without_urls
from graphctx.data.parallel import ordered_map
from graphctx.data.records import load_table, rows_from_table
from graphctx.data.settings import DatasetSettings
from graphctx.data.stackexchange import DumpReader, RawQuestion
from graphctx.errors import ConfigError, DataError

TABLE_SUFFIXES = {".json", ".jsonl", ".csv", ".parquet"}


def is_table(source: str) -> bool:
    """Whether ``source`` is read as a table (``hf:`` or a tabular file) rather than as a dump."""
    return source.startswith("hf:") or Path(source).suffix.lower() in TABLE_SUFFIXES


def check_source(source: str) -> None:
    """A :class:`DataError` naming ``source`` when its file or dump is not there (cheap: call it before any
    model or tokenizer loads)."""
    if source.startswith("hf:"):
        return
    path = Path(source)
    if path.suffix.lower() in TABLE_SUFFIXES:
        if not path.is_file():
            raise DataError(f"{path}: data file not found")
    else:
        resolve_dump(path)


def source_fingerprint(source: str) -> Any:
    """The source's part of the dataset cache key: the ``hf:`` name, a file's SHA-256, a dump's file
    digests, or an archive's name, size and modification time."""
    check_source(source)
    if source.startswith("hf:"):
        return source
    path = Path(source)
    if path.suffix.lower() in TABLE_SUFFIXES:
        return file_digest(path)
    files = resolve_dump(path)
    if files.archive is not None:  # size and modification time: hashing GBs on every run costs seconds
        stat = files.archive.stat()
        return [files.archive_format, files.archive.name, stat.st_size, stat.st_mtime_ns]
    return [file_digest(files.posts), file_digest(files.links) if files.links else None]


def source_digests(source: str) -> Any:
    """What the source's bytes are, as the dump manifest records them: ``{file name: SHA-256}`` of a
    dump's archive, or of its Posts.xml and PostLinks.xml, or of a tabular file; an ``hf:`` name as is.
    Unlike :func:`source_fingerprint`, an archive is hashed (a rewrite that keeps size and time differs)."""
    if source.startswith("hf:"):
        return source
    path = Path(source)
    if path.suffix.lower() in TABLE_SUFFIXES:
        files = [path]
    else:
        dump = resolve_dump(path)
        files = [dump.archive] if dump.archive else [p for p in (dump.posts, dump.links) if p]
    return {file.name: file_digest(file) for file in files}


@dataclass
class DateSpan:
    """The first and last of the creation times it was shown (canonical ISO strings sort as time)."""

    first: str | None = None
    last: str | None = None

    def add(self, created: str) -> None:
        self.first = created if self.first is None else min(self.first, created)
        self.last = created if self.last is None else max(self.last, created)


@dataclass
class SourceRead:
    """What :func:`candidates` read, filled in once the source is read through."""

    counts: Counter[str] = field(default_factory=Counter)
    """What the source held (rows, questions, answers...)."""
    span: DateSpan = field(default_factory=DateSpan)
    """The creation times of all its questions."""
    manifest: dict[str, Any] = field(default_factory=dict)
    """The files read (name, size, SHA-256) and the first and last post dates."""


def candidates(
    settings: DatasetSettings, keep: QuestionFilter, scratch: Path, workers: int, read: SourceRead
) -> Iterator[Cleaned]:
    """``(reason, None)`` or ``(None, (row, answer text beyond links))`` per source question, in source order.

    ``reason`` comes from the cheap checks (``keep.reject_raw``), so HTML is cleaned only for questions
    that pass them; dump HTML is cleaned in ``workers`` processes (``scratch``: the dump reader's working
    folder). ``read`` receives what was read (:class:`SourceRead`).
    """
    if is_table(settings.source):
        return _table_candidates(settings, keep, read)
    return _dump_candidates(settings, keep, scratch, workers, read)


def _table_candidates(settings: DatasetSettings, keep: QuestionFilter, read: SourceRead) -> Iterator[Cleaned]:
    source, counts, span = settings.source, read.counts, read.span
    if not source.startswith("hf:"):
        path = Path(source)
        read.manifest["files"] = [
            {"name": path.name, "size": path.stat().st_size, "sha256": file_digest(path)}
        ]
    table = load_table(source, settings.hf_split)
    site = settings.site or Path(source.removeprefix("hf:")).stem
    for row in rows_from_table(table, settings.column_mapping, site, source):
        counts["rows"] += 1
        counts["questions"] += 1
        counts["with_accepted_answer"] += bool(row["answer"])
        span.add(row["created"])
        reason = keep.reject_raw(bool(row["answer"]), [])
        yield (reason, None) if reason else (None, (row, without_urls(row["answer"]).strip()))
    read.manifest.update(first_post=span.first, last_post=span.last)


def _dump_candidates(
    settings: DatasetSettings, keep: QuestionFilter, scratch: Path, workers: int, read: SourceRead
) -> Iterator[Cleaned]:
    reader = DumpReader(settings.source, scratch)
    site = settings.site or reader.files.site
    screened = (_screen(keep, raw, read.span) for raw in reader.questions())
    clean = partial(clean_screened, site=site, origin=str(reader.posts))
    try:
        yield from ordered_map(clean, screened, workers, preload=["graphctx.data.cleaning"])
    except BrokenProcessPool as exc:
        raise ConfigError(
            f"data.dataset.workers: a worker cleaning {reader.posts} died (killed for memory, or the main "
            "script could not be re-imported: guard its entry point with if __name__ == '__main__'); "
            "set workers: 1 to clean in this process"
        ) from exc
    read.counts.update(reader.counts)
    files = reader.files
    if files.archive is not None:
        stat = files.archive.stat()
        read.manifest["archive"] = {
            "name": files.archive.name,
            "format": files.archive_format,
            "size": stat.st_size,
            "sha256": file_digest(files.archive),
        }
    read.manifest.update(files=files.manifest, first_post=reader.first_post, last_post=reader.last_post)


def _screen(keep: QuestionFilter, raw: RawQuestion, span: DateSpan) -> Screened:
    """``(reason, None)`` when the cheap checks reject ``raw`` (HTML dropped), else ``(None, raw)``."""
    span.add(raw.created)
    reason = keep.reject_raw(raw.answer_html is not None, raw.duplicate_of, raw.answer_parent_mismatch)
    return (reason, None) if reason else (None, raw)
