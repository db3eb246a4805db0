"""Where a dump's files are: a site folder, a Posts.xml (plain or gzip, under any name), or a site's
archive (``.7z`` as published, or ``.zip`` / ``.tar`` / ``.tar.gz`` / ``.tgz``).

A folder holds ``Posts.xml`` or ``Posts.xml.gz`` (and ``PostLinks.xml`` or ``PostLinks.xml.gz``); a file
given directly is read as the site's Posts.xml whatever its name (``posts-2021.xml``), with the
PostLinks.xml of its folder. An archive's format is the one libarchive finds in its bytes, not its suffix
(a zip renamed ``.7z`` is recorded as ``zip``).

A ``.7z`` archive is read in place with libarchive (``libarchive-c``): ``Posts.xml`` and
``PostLinks.xml`` are streamed out block by block, so no unpacked copy is written and memory stays flat.
libarchive was measured against py7zr and Debian's ``7zz`` on a 100 MB Posts.xml
(docs/performance.md): fastest (0.78 s against 1.66 s and 1.06 s), flat memory (py7zr held 250 MB) and
a pull interface that lxml reads from directly. Each member's SHA-256 is computed as it streams (the dump
manifest).
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import libarchive
from libarchive.exception import ArchiveError

from graphctx.errors import DataError

ARCHIVE_SUFFIXES = (".7z", ".zip", ".tar", ".tgz", ".tar.gz")
GZIP_MAGIC = b"\x1f\x8b"
POSTS, LINKS = "Posts.xml", "PostLinks.xml"
BLOCK_BYTES = 1 << 20


@dataclass
class DumpFiles:
    """A dump's files: the folder or archive they are read from, and what was read (the manifest)."""

    posts: Path
    """Posts.xml (in an archive: ``<archive>/Posts.xml``, a name for messages only)."""
    links: Path | None
    archive: Path | None = None
    archive_format: str | None = None
    """The archive's format as found in its bytes (:func:`archive_format`): ``7z``, ``zip``, ``tar+gzip``."""
    manifest: list[dict[str, Any]] = field(default_factory=list)
    """One entry per file read: name, size (bytes, uncompressed), sha256, compression."""

    @property
    def site(self) -> str:
        """The site's name: ``askubuntu.com.7z`` -> ``askubuntu``, ``unix.stackexchange.com.7z`` -> ``unix``;
        for a folder, its name."""
        if self.archive is None:
            return self.posts.parent.name
        return site_name(self.archive)

    def members(self) -> Iterator[tuple[str, IO[bytes]]]:
        """``(name, readable stream)`` of Posts.xml and PostLinks.xml, in the order they are stored; ``name``
        is :data:`POSTS` or :data:`LINKS` whatever the file is called (the manifest keeps its own name)."""
        if self.archive is None:
            for name, path in ((LINKS, self.links), (POSTS, self.posts)):
                if path is not None:
                    with _plain(path) as (stream, compression):
                        hashed = _Hashed(stream)
                        yield name, hashed
                        self._record(path.name, hashed, compression)
            return
        try:
            with libarchive.file_reader(str(self.archive)) as archive:
                for entry in archive:
                    name = Path(entry.pathname).name
                    if not entry.isfile or self.archive / entry.pathname not in (self.posts, self.links):
                        continue  # only the site's own files: the folder of its Posts.xml
                    hashed = _Hashed(_Blocks(entry.get_blocks(BLOCK_BYTES)))
                    yield name, hashed
                    self._record(name, hashed, self.archive_format)
        except ArchiveError as exc:
            kind = _archive_suffix(self.archive).lstrip(".")
            raise DataError(f"{self.archive}: cannot read the {kind} archive ({_reason(exc)})") from exc

    def _record(self, name: str, hashed: _Hashed, compression: str | None) -> None:
        self.manifest.append(
            {
                "name": name,
                "size": hashed.size,
                "sha256": hashed.digest.hexdigest(),
                "compression": compression,
            }
        )


def site_name(archive: Path) -> str:
    """``askubuntu.com.7z`` -> ``askubuntu``; ``unix.stackexchange.com.7z`` -> ``unix``; ``a.tar.gz`` ->
    ``a``."""
    name = archive.name.removesuffix(_archive_suffix(archive))
    for tail in (".stackexchange.com", ".com", ".net", ".org"):
        if name.endswith(tail) and len(name) > len(tail):
            return name.removesuffix(tail)
    return name


WHERE_TO_GET = (
    "download the site's archive (e.g. askubuntu.com.7z) from the Stack Exchange data dump, "
    "https://archive.org/details/stackexchange, and set data.dataset.source to its path (no need to "
    "unpack it)"
)
"""The missing-dump error's next step (graphctx never downloads: the user does, once)."""


def _archive_suffix(path: Path) -> str:
    """The archive suffix ``path``'s name ends with (:data:`ARCHIVE_SUFFIXES`, any case), or ``""``."""
    name = path.name.lower()
    return next((suffix for suffix in ARCHIVE_SUFFIXES if name.endswith(suffix)), "")


def _present(folder: Path, name: str) -> Path | None:
    """``folder/name``, else ``folder/name.gz``, when it is a file; else None."""
    return next((p for p in (folder / name, folder / f"{name}.gz") if p.is_file()), None)


def resolve_dump(path: str | Path) -> DumpFiles:
    """The dump at ``path``: a site folder, a Posts.xml under any name, or a site's archive (checked: it
    opens, holds one Posts.xml, is not encrypted); a ``DataError`` naming it and what is wrong otherwise."""
    path = Path(path)
    if _archive_suffix(path):
        return _resolve_archive(path)
    posts = _present(path, POSTS) if path.is_dir() else path
    if posts is None or not posts.is_file():
        raise DataError(
            f"{posts or path / POSTS}: not found (expected a Stack Exchange site folder holding Posts.xml "
            f"or Posts.xml.gz, a Posts.xml, or a site's .7z / .zip / .tar.gz archive); {WHERE_TO_GET}"
        )
    return DumpFiles(posts, _present(posts.parent, LINKS))


def archive_format(archive: Any) -> str:
    """A short name of a libarchive reader's format and filters, read from the bytes: ``7z``, ``zip``,
    ``tar``, ``tar+gzip``..."""
    raw = archive.format_name
    name = (raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)).lower()
    short = next((k for k, v in _FORMATS.items() if any(word in name for word in v)), name)
    filters = [f.decode() if isinstance(f, bytes) else str(f) for f in archive.filter_names]
    return "+".join([short, *(f for f in filters if f != "none")])


_FORMATS = {"7z": ("7-zip", "7zip"), "zip": ("zip",), "tar": ("tar", "pax", "ustar")}


def _resolve_archive(path: Path) -> DumpFiles:
    if not path.is_file():
        raise DataError(f"{path}: archive not found")
    found: dict[str, list[str]] = {POSTS: [], LINKS: []}
    try:
        with libarchive.file_reader(str(path)) as archive:
            for entry in archive:
                name = Path(entry.pathname).name
                if entry.isfile and name in found:
                    found[name].append(entry.pathname)
                    if name == POSTS:  # an encrypted entry fails at its first block
                        next(iter(entry.get_blocks()), None)
            kind = archive_format(archive)
    except ArchiveError as exc:
        message = _reason(exc)
        if "encrypt" in message.lower() or "passphrase" in message.lower():
            raise DataError(f"{path}: the archive is password-protected ({message})") from exc
        kind = _archive_suffix(path).lstrip(".")
        raise DataError(f"{path}: cannot read the {kind} archive (truncated or corrupt? {message})") from exc
    if not found[POSTS]:
        raise DataError(f"{path}: the archive holds no Posts.xml (is it a Stack Exchange site dump?)")
    if len(found[POSTS]) > 1:
        raise DataError(
            f"{path}: the archive holds {len(found[POSTS])} sites ({', '.join(sorted(found[POSTS]))}); "
            "give one site's archive"
        )
    folder = Path(found[POSTS][0]).parent
    links = [name for name in found[LINKS] if Path(name).parent == folder]
    posts, links_file = path / found[POSTS][0], path / links[0] if links else None
    return DumpFiles(posts, links_file, archive=path, archive_format=kind)


def _reason(exc: ArchiveError) -> str:
    message = getattr(exc, "msg", None) or str(exc)
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)


@contextmanager
def _plain(path: Path) -> Iterator[tuple[IO[bytes], str | None]]:
    """A file opened for reading; a gzip file (by its magic bytes, whatever its name) is decompressed."""
    with open(path, "rb") as handle:
        if handle.read(2) == GZIP_MAGIC:
            handle.seek(0)
            with gzip.open(handle) as unzipped:
                yield unzipped, "gzip"
            return
        handle.seek(0)
        yield handle, None


class _Blocks:
    """A readable byte stream over an iterator of blocks (libarchive's ``get_blocks``)."""

    def __init__(self, blocks: Iterator[bytes]) -> None:
        self._blocks = blocks
        self._block = b""
        self._at = 0

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left for a negative size); ``b""`` at the end."""
        if size < 0:
            rest = [self._block[self._at :], *map(bytes, self._blocks)]
            self._block, self._at = b"", 0
            return b"".join(rest)
        while self._at >= len(self._block):
            block = next(self._blocks, None)
            if block is None:
                return b""
            self._block, self._at = bytes(block), 0
        out = self._block[self._at : self._at + size]
        self._at += len(out)
        return out


class _Hashed:
    """A readable stream that hashes and counts the bytes read through it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.digest = hashlib.sha256()
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.digest.update(data)
        self.size += len(data)
        return data
