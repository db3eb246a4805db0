"""One run per output folder: an advisory lock that the kernel releases when its holder dies.

evaluate.py holds one on its output folder and train.py on its ``trainer.default_root_dir``, for the whole
run, on the launching process (rank 0) only: the ranks of one run share the folder. A second run on the
same folder is refused in one line naming the holder's pid. ``fcntl.flock`` is released by the kernel when
the holding process ends however it ends (``kill -9``, a preempted SLURM job), so a stale lock is simply
taken over and a requeued job starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from graphctx.errors import ConfigError

LOCK_FILE = ".graphctx.lock"


class FolderLock:
    """The lock of ``folder`` for ``what`` (e.g. ``an evaluate.py run``), taken by :meth:`acquire`."""

    def __init__(self, folder: str | os.PathLike[str], what: str) -> None:
        self.folder = Path(folder)
        self.what = what
        self.path = self.folder / LOCK_FILE
        self.handle: IO[str] | None = None
        self.created = False
        self.holder = ""

    def acquire(self) -> bool:
        """Take the lock (creating the folder when missing); False when another process holds it
        (:attr:`holder`: its pid as it wrote it)."""
        self.created = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")  # noqa: SIM115 - held for the whole run
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            self.holder = handle.read().strip() or "?"
            handle.close()
            return False
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self.handle = handle
        return True

    def refusal(self) -> ConfigError:
        """The one-line error for a folder another process holds."""
        return ConfigError(
            f"{self.folder}: {self.what} is already using this folder (pid {self.holder}); wait for it to "
            "end or choose another folder (a lock left by a process that died is taken over by itself)"
        )

    def release(self) -> None:
        """Let the lock go; a folder this lock created and nothing else wrote into is removed again."""
        if self.handle is None:
            return
        if self.created and [p.name for p in self.folder.iterdir()] == [LOCK_FILE]:
            self.path.unlink()
            self.folder.rmdir()
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()
        self.handle = None


@contextlib.contextmanager
def holding(folder: str | os.PathLike[str], what: str) -> Iterator[FolderLock]:
    """Hold the lock of ``folder`` for the block; :class:`ConfigError` when another process holds it."""
    lock = FolderLock(folder, what)
    if not lock.acquire():
        raise lock.refusal()
    try:
        yield lock
    finally:
        lock.release()
