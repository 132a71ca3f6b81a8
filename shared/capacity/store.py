"""The capacity store: the four tables, their outboxes and the settings, in one object.

Services take a :class:`CapacityStore` instead of reaching for globals, so a
test or a benchmark can point them at any account. :func:`shared.wiring.capacity.store`
is the process-wide one the triggers use (table clients are thread-safe).
"""

from __future__ import annotations

import queue
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from azure.data.tables import TableClient, TableServiceClient

from shared.capacity.edition_authority import EditionsAuthority
from shared.capacity.keys import LEASES_TABLE, POOLS_TABLE, QUOTAS_TABLE, SLOTS_TABLE
from shared.capacity.settings import CapacitySettings
from shared.platform.events.cloudevents import CloudEvent, NewEvent
from shared.platform.events.outbox import Outbox, outbox_for
from shared.platform.logs import app_logger
from shared.platform.lru_cache import LruCache as LruCache  # the capacity modules' remembered rows
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import query_rows
from shared.platform.storage.conditional import submit_batch as submit_batch  # the storage adapters' one batch
from shared.platform.storage.paging import PageSeal, paging_seal

log = app_logger("capacity")
# The capacity modules' name for the storage adapters' one query (shared.platform.storage.conditional.query_rows).
query = query_rows


@dataclass(frozen=True)
class CapacityStore:
    pools: TableClient
    slots: TableClient
    quotas: TableClient
    leases: TableClient
    pools_outbox: Outbox
    slots_outbox: Outbox
    settings: CapacitySettings
    # Where editions' quotas come from when not from these tables: ControlPlaneApi, when it is their
    # authority (shared.capacity.edition_authority); None: the host's own tables and settings.
    editions_authority: EditionsAuthority | None = None
    tables: TableServiceClient | None = None  # the account's tables (the lists' continuation seal lives there)

    @property
    def seal(self) -> PageSeal:
        if self.tables is None:
            raise RuntimeError("this CapacityStore was made without its account's tables; make it with from_clients")
        return paging_seal(self.tables)

    @classmethod
    def from_clients(
        cls,
        clients: StorageClients,
        settings: CapacitySettings,
        source: str,
        editions_authority: EditionsAuthority | None = None,
    ) -> CapacityStore:
        return cls(
            pools=clients.tables.get_table_client(POOLS_TABLE),
            slots=clients.tables.get_table_client(SLOTS_TABLE),
            quotas=clients.tables.get_table_client(QUOTAS_TABLE),
            leases=clients.tables.get_table_client(LEASES_TABLE),
            pools_outbox=outbox_for(clients, POOLS_TABLE, source),
            slots_outbox=outbox_for(clients, SLOTS_TABLE, source),
            settings=settings,
            editions_authority=editions_authority,
            tables=clients.tables,
        )


def jittered_pause(attempt: int, cap_seconds: float = 0.05) -> None:
    """After a lost race: sleep a random time up to an exponentially growing cap ("full jitter"),
    so that contenders spread out instead of colliding again in step."""
    time.sleep(random.uniform(0, min(cap_seconds, 0.002 * 2**attempt)))


class _BackgroundDispatch:
    """Sends committed events off the request's path.

    The commit already made the events durable, so this is only about
    latency: a bounded backlog served by daemon threads. When the backlog is
    full, or the process stops with events still queued, they stay pending in
    the outbox and the dispatcher timer sends them (at-least-once either way).
    Queued events are *held* (this process's dispatcher timer leaves them to
    this sender), and sent ones are marked dispatched by the stream's next
    commit or, once it is quiet, in one batch (``Outbox.dispatch_marking_later``):
    two queue sends a lease cycle, and no write of their own.
    """

    def __init__(self, workers: int = 2, backlog: int = 2000) -> None:
        self._queue: queue.Queue[tuple[Outbox, list[CloudEvent]]] = queue.Queue(maxsize=backlog)
        self._workers = workers
        self._started = False
        self._lock = threading.Lock()

    def submit(self, outbox: Outbox, events: list[CloudEvent]) -> None:
        self._start()
        outbox.hold(events)
        try:
            self._queue.put_nowait((outbox, events))
        except queue.Full:
            outbox.unhold(events)
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
            outbox.dispatch_marking_later(events)  # never raises: failures stay pending for the timer


_dispatcher = _BackgroundDispatch()


def commit_and_dispatch(
    outbox: Outbox, stream: str, operations: Sequence[tuple[Any, ...]], events: Iterable[NewEvent]
) -> list[CloudEvent]:
    """Commit state and events atomically, then send the events in the background."""
    return commit_dispatch_etags(outbox, stream, operations, events)[0]


def commit_dispatch_etags(
    outbox: Outbox, stream: str, operations: Sequence[tuple[Any, ...]], events: Iterable[NewEvent]
) -> tuple[list[CloudEvent], list[Mapping[str, Any]]]:
    """:func:`commit_and_dispatch`, also returning each operation's metadata (its new ``etag``)."""
    committed, results = outbox.commit_batch(stream, operations, events)
    if committed:
        _dispatcher.submit(outbox, committed)
    return committed, results
