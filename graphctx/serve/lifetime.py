"""No process of ``graphctx serve`` outlives its main process, however that one ends.

LitServe starts a manager process (forked: it inherits the listening socket) and the inference worker
(spawned). Each child asks the kernel for ``SIGKILL`` when the main process dies
(``prctl(PR_SET_PDEATHSIG)``, Linux), then checks the parent it was started by is still its parent (the
main process may have died before the request was made). A ``kill -9`` of the main process so leaves no
child holding the port, the worker's memory or a half-open client connection.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.util
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """In a child: ``SIGKILL`` when process ``parent`` (the one that started this one) ends; ends now if it
    already has. A no-op off Linux."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(1)


def _after_fork(parent: int) -> None:
    die_with_parent(parent)


class _Main:
    """The owner of the after-fork hook (``multiprocessing.util.register_after_fork`` keeps it by weak
    reference: it lives as long as this module)."""


_MAIN = _Main()


def guard_children() -> None:
    """In the main process, before LitServe starts: every process it forks from now on dies with it (the
    spawned worker calls :func:`in_spawned_child` itself)."""
    parent = os.getpid()
    multiprocessing.util.register_after_fork(_MAIN, lambda _: _after_fork(parent))


def in_spawned_child() -> None:
    """In a spawned child (LitServe's inference worker): die with the process that started it."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        die_with_parent(parent.pid)
