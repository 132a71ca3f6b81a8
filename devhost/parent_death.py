"""Child processes that end with the process that started them.

Azurite runs in a session of its own (so that Ctrl-C in a terminal reaches the
host first), and test hosts outlive a test worker that is killed: without this,
a test run stopped hard (a killed pytest-xdist worker, a second Ctrl-C during
teardown) leaves Azurites and hosts running, holding ports and CPU. Linux's
parent-death signal (``prctl(PR_SET_PDEATHSIG)``) asks the kernel to signal the
child when its parent goes; it survives ``exec``. Elsewhere it does nothing.

The kernel follows the parent *thread* that started the child, not its
process: a child started from a short-lived thread (a ``threading.Timer`` that
brings a store back after an outage) would be signalled when that thread
ends. So only a child started from the main thread is arranged; one started
from any other thread is left as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import sys
import threading
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return libc.prctl


# Resolved here, in the parent: between fork and exec the child only makes the one call.
_PRCTL = _prctl()


def signalled_on_parent_death(signum: signal.Signals) -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that has the child sent ``signum`` when its parent dies
    (None, nothing arranged, off Linux or outside the main thread)."""
    if _PRCTL is None or threading.current_thread() is not threading.main_thread():
        return None
    prctl, number = _PRCTL, int(signum)

    def arrange() -> None:
        prctl(PR_SET_PDEATHSIG, number)

    return arrange
