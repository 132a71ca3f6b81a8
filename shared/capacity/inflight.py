"""Rows this process is writing right now, so that its own concurrent acquires pick different ones.

Two acquires of one process that try the same free slot or quota token both
pay a round trip and one of them loses (412) and reads again. Skipping a row
another thread of this process is writing avoids that. Purely a local
optimisation: which write wins is still decided by storage (every write is
conditional on the row's ETag), and other instances are not coordinated.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable


class InFlight:
    """A thread-safe set of keys: ``take`` one before writing its row, ``done`` after."""

    def __init__(self) -> None:
        self._keys: set[Hashable] = set()
        self._lock = threading.Lock()

    def take(self, key: Hashable) -> bool:
        """True if nobody in this process is writing ``key``'s row (it is now yours until ``done``)."""
        with self._lock:
            if key in self._keys:
                return False
            self._keys.add(key)
            return True

    def done(self, key: Hashable) -> None:
        with self._lock:
            self._keys.discard(key)
