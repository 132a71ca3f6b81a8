"""Fixtures' parts for the domain tier: a store in memory and a clock the test moves.

The domain tier (``pytest -m domain``, ``make test-domain``) runs the domain's logic against
:class:`tests.support.memory_storage.MemoryStorage` through the product's own stores, with no
Azurite and no host; ``tests/storage_contract/`` keeps that store honest against Azurite.
Time is the product's one clock (:mod:`shared.platform.clock`), replaced by :class:`ManualClock`,
so expiries and grace periods pass when the test says, without sleeping.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from shared.platform import clock
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.resources import ensure_resources
from tests.support.memory_storage import MemoryStorage

TICK = timedelta(microseconds=1)


class ManualClock:
    """Now, as the test sets it: starts at the real time (rows look ordinary) and moves on request.

    Every reading also moves it on by a microsecond, as a real clock moves between any two reads: the
    domain compares instants it read one after the other (a lease granted before the census saw it
    valid), which a clock standing still would make equal.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime.now(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            self._now += TICK
            return self._now

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now


def install_clock(monkeypatch: pytest.MonkeyPatch) -> ManualClock:
    """Replace the product's clock for one test (every caller writes ``clock.utcnow()``, so all see it)."""
    manual = ManualClock()
    monkeypatch.setattr(clock, "utcnow", manual.now)
    return manual


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def memory_store() -> tuple[MemoryStorage, StorageClients]:
    """A fresh in-memory store with the host's tables, containers and queues, made as the host makes them at
    its start (``ensure_resources``), and the product's clients on it."""
    storage = MemoryStorage()
    clients = storage.clients()
    ensure_resources(clients)
    return storage, clients
