"""The capacity store: the four tables, their outboxes and the settings, in one object.

Services take a :class:`CapacityStore` instead of reaching for globals, so a
test or a benchmark can point them at any account. ``default_store()`` is the
process-wide one the triggers use (table clients are thread-safe).
"""

from __future__ import annotations

import functools
import logging
import queue
import random
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Generic, Iterable, Mapping, Sequence, TypeVar

from azure.core.exceptions import ServiceRequestError, ServiceResponseError
from azure.data.tables import TableClient, TableTransactionError

from shared.capacity.keys import LEASES_TABLE, POOLS_TABLE, QUOTAS_TABLE, SLOTS_TABLE
from shared.capacity.settings import CapacitySettings
from shared.errors import AlreadyExists, ConcurrencyConflict, NotFound, StoreUnavailable
from shared.events.cloudevents import CloudEvent, NewEvent
from shared.events.outbox import Outbox, outbox_for
from shared.storage.clients import StorageClients

log = logging.getLogger("runtime_cloud.capacity")
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class CapacityStore:
    pools: TableClient
    slots: TableClient
    quotas: TableClient
    leases: TableClient
    pools_outbox: Outbox
    slots_outbox: Outbox
    settings: CapacitySettings

    @classmethod
    def from_clients(cls, clients: StorageClients, settings: CapacitySettings, source: str) -> CapacityStore:
        return cls(
            pools=clients.tables.get_table_client(POOLS_TABLE),
            slots=clients.tables.get_table_client(SLOTS_TABLE),
            quotas=clients.tables.get_table_client(QUOTAS_TABLE),
            leases=clients.tables.get_table_client(LEASES_TABLE),
            pools_outbox=outbox_for(clients, POOLS_TABLE, source),
            slots_outbox=outbox_for(clients, SLOTS_TABLE, source),
            settings=settings,
        )


def query(table: TableClient, filter_text: str, **parameters: Any) -> list[dict[str, Any]]:
    """All rows matching ``filter_text``, each with its ETag under ``"etag"``."""
    try:
        rows = []
        for entity in table.query_entities(filter_text, parameters=parameters or None):
            row = dict(entity)
            row["etag"] = entity.metadata["etag"]
            rows.append(row)
        return rows
    except (ServiceRequestError, ServiceResponseError) as error:
        raise StoreUnavailable(str(error)) from error


def jittered_pause(attempt: int, cap_seconds: float = 0.05) -> None:
    """After a lost race: sleep a random time up to an exponentially growing cap ("full jitter"),
    so that contenders spread out instead of colliding again in step."""
    time.sleep(random.uniform(0, min(cap_seconds, 0.002 * 2 ** attempt)))


class LruCache(Generic[K, V]):
    """A small thread-safe least-recently-used map (per process)."""

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


def submit_batch(table: TableClient, operations: Sequence[tuple[Any, ...]]) -> list[Mapping[str, Any]]:
    """An atomic batch in one partition; a lost race becomes the domain's conflict errors.

    Returns each operation's metadata (with its new ``etag``).
    """
    try:
        return table.submit_transaction(list(operations))
    except TableTransactionError as error:
        if error.status_code == 409:
            raise AlreadyExists(f"{table.table_name}: {error.error_code}") from error
        if error.status_code == 412:
            raise ConcurrencyConflict(f"{table.table_name}: {error.error_code}") from error
        if error.status_code == 404:
            raise NotFound(f"{table.table_name}: {error.error_code}") from error
        raise
    except (ServiceRequestError, ServiceResponseError) as error:
        raise StoreUnavailable(str(error)) from error


class _BackgroundDispatch:
    """Sends committed events off the request's path.

    The commit already made the events durable, so this is only about
    latency: a bounded backlog served by daemon threads. When the backlog is
    full, or the process stops with events still queued, they stay pending in
    the outbox and the dispatcher timer sends them (at-least-once either way).
    """

    def __init__(self, workers: int = 2, backlog: int = 2000) -> None:
        self._queue: queue.Queue[tuple[Outbox, list[CloudEvent]]] = queue.Queue(maxsize=backlog)
        self._workers = workers
        self._started = False
        self._lock = threading.Lock()

    def submit(self, outbox: Outbox, events: list[CloudEvent]) -> None:
        self._start()
        try:
            self._queue.put_nowait((outbox, events))
        except queue.Full:
            log.debug("event backlog full; %d event(s) left to the outbox dispatcher", len(events))

    def _start(self) -> None:
        with self._lock:
            if self._started:
                return
            for index in range(self._workers):
                threading.Thread(target=self._run, name=f"capacity-events-{index}", daemon=True).start()
            self._started = True

    def _run(self) -> None:
        while True:
            outbox, events = self._queue.get()
            outbox.dispatch(events)  # never raises: failures stay pending for the timer


_dispatcher = _BackgroundDispatch()


def commit_and_dispatch(outbox: Outbox, stream: str, operations: Sequence[tuple[Any, ...]],
                        events: Iterable[NewEvent]) -> list[CloudEvent]:
    """Commit state and events atomically, then send the events in the background."""
    try:
        committed = outbox.commit(stream, operations, events)
    except (ServiceRequestError, ServiceResponseError) as error:
        raise StoreUnavailable(str(error)) from error
    if committed:
        _dispatcher.submit(outbox, committed)
    return committed


@functools.lru_cache(maxsize=1)
def default_store() -> CapacityStore:
    """The process's store. Its first use on an instance seeds the settings' pools and editions, so
    no timer has to run at start (on a scale-to-zero plan that would run on every instance start);
    seeding that fails (the store is down) is not cached, and the next use tries again."""
    from shared.capacity.editions import seed_editions  # (both import this module)
    from shared.capacity.pools import seed_pools
    from shared.settings import get_settings
    from shared.storage.clients import shared_host_storage

    settings = get_settings()
    store = CapacityStore.from_clients(shared_host_storage(), settings.runtime_cloud.capacity,
                                       f"/{settings.messaging.service_name}")
    seed_editions(store)
    seed_pools(store)
    return store
