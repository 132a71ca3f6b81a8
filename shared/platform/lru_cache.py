"""A small bounded map that a process keeps in memory (remembered ETags, rows it wrote).

Such memory only ever saves a read: every write that relies on it is still
conditional on the ETag it holds, so a stale entry costs one failed write and a
fresh read, never a wrong answer.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """A thread-safe least-recently-used map holding at most ``capacity`` entries."""

    def __init__(self, capacity: int) -> None:
        self._items: OrderedDict[K, V] = OrderedDict()
        self._capacity = capacity
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)

    def forget(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)
