"""A port on which every connection is refused, for as long as the test process lives.

A port merely found free (``devhost.azurite.free_port``) is free only at that moment: Azurites and
hosts take free ports all the time, the more so with the suite in parallel workers (Makefile,
TEST_WORKERS), so an "unreachable" endpoint could start answering in the middle of a test. Here a
socket of this process stays bound to the port without listening: the kernel refuses connections
to it, and no other process can bind it (this socket does not set ``SO_REUSEADDR``).
"""

from __future__ import annotations

import socket

_held: socket.socket | None = None


def closed_port() -> int:
    """The process's refusing port (one is enough for every unreachable endpoint of its tests)."""
    global _held
    if _held is None:
        held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        held.bind(("127.0.0.1", 0))
        _held = held
    return int(_held.getsockname()[1])
