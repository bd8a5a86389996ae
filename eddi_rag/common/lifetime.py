"""A child process that ends with its parent, and the name ``ps`` shows for it."""

from __future__ import annotations

import os
import signal


def die_with_parent() -> None:
    """Linux: the kernel kills this process when its parent dies (even by kill -9), so nothing outlives the server that
    started it: a parse, a serving process. (PR_SET_PDEATHSIG fires when the *thread* that started the process ends:
    start such processes from one long-lived thread.)"""
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: a parse ends at its CPU limit or on its first write
        pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def name_process(name: str) -> None:
    """Linux: the name ``ps``, ``pgrep`` and /proc/<pid>/comm show (15 bytes at most)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(15, name.encode()[:15])  # PR_SET_NAME
    except (OSError, AttributeError):
        pass
