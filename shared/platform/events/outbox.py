"""The transactional outbox: events are written with the state change, then sent.

Why: a state change and the event announcing it must not part ways. Azure
Table Storage commits a batch atomically only within one partition, so the
outbox rows live in the same table and partition as the state they announce
(a *stream*: one environment, one pool). A batch holds, atomically:

- the caller's own operations (the state change),
- one outbox row per event (RowKey ``~outbox|{sequence:012d}``), and
- the stream's sequence row (``~outbox-sequence``), replaced under its ETag.

The sequence row's ETag serialises writers of one stream, so sequence numbers
are gap-free and ordered; a writer that loses the race gets
:class:`ConcurrencyConflict` and retries with fresh state. A process
remembers the sequence row (number and ETag) its own last commit of a stream
left, and reads it only when it has none or another writer moved it on (the
batch then fails at the sequence operation alone, and is sent once more with
the row read afresh): a busy stream written by one instance costs one call
per commit, not two.

Besides the public ``runtime-cloud-events`` queue, an outbox may fan events
out to queues of other modules of this host (the inventory listens to
provisioning's events on ``inventory-inbox``), so no module steals another's
messages from a shared queue.

An event is one table property and one queue message, so it is bounded by
:data:`MAX_EVENT_BYTES`: a property holds 64 KiB (UTF-16), a queue message
64 KiB after base64. Anything that grows with an environment goes by
reference (a blob and its digest), and an event over the bound is refused
here, by name, instead of failing the batch with the store's raw error.

Dispatch is at-least-once: right after the commit the writer sends its events
to the ``runtime-cloud-events`` queue and marks them dispatched; the
``outbox_dispatcher`` timer sends whatever a crash left pending. Consumers
dedupe by event id. A writer that sends in the background
(:meth:`Outbox.dispatch_marking_later`) leaves the marks to the stream's next
commit, which carries them at no extra call, or to one batch once the stream
is quiet (:mod:`shared.platform.events.sent_marks`); meanwhile this process's timer
leaves those events alone.

So that the dispatcher never scans a whole table (lease history alone keeps
months of rows), a writer first upserts a *marker* for its stream in table
``OutboxPending`` (partition = table name). The dispatcher reads only the
partitions that markers name, and removes a marker once that partition has
nothing pending and the marker has not been touched for a while (a writer
between its marker and its commit is never more than seconds away). A writer
touches its stream's marker at most once a minute, well inside that while.
"""

from __future__ import annotations

import atexit
import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceModifiedError, ResourceNotFoundError
from azure.data.tables import TableClient, TableTransactionError, UpdateMode
from azure.storage.queue import QueueClient

from shared.platform import clock
from shared.platform.errors import ConcurrencyConflict, RuntimeCloudError
from shared.platform.events.cloudevents import CloudEvent, NewEvent
from shared.platform.events.sent_marks import MAX_MARKS_PER_BATCH, SentMarks, table_identity
from shared.platform.events.sequence_floor import sequence_floor
from shared.platform.logs import app_logger
from shared.platform.lru_cache import LruCache
from shared.platform.storage.clients import StorageClients
from shared.platform.storage.conditional import read_row, submit_batch
from shared.platform.storage.resources import OUTBOX_SUBSCRIBERS
from shared.platform.telemetry import current_trace_context

log = app_logger("outbox")

EVENTS_QUEUE = "runtime-cloud-events"
PENDING_TABLE = "OutboxPending"
MARKER_GRACE = timedelta(minutes=5)
MARKER_REFRESH = timedelta(seconds=60)  # a writer re-touches its stream's marker at most this often
SEQUENCE_ROW = "~outbox-sequence"
OUTBOX_PREFIX = "~outbox|"
_OUTBOX_END = "~outbox}"  # the character after "|": an exclusive upper bound for the prefix

# 32 KiB of UTF-8 is at most 64 KiB as UTF-16 (a table property) and ~43 KiB as base64 (a queue message).
MAX_EVENT_BYTES = 32 * 1024

TransactionOperation = tuple[Any, ...]


class EventTooLarge(RuntimeCloudError):
    """An event would not fit a table property or a queue message: its payload belongs in a blob."""


def outbox_row_key(sequence: int) -> str:
    return f"{OUTBOX_PREFIX}{sequence:012d}"


class Outbox:
    def __init__(
        self,
        table: TableClient,
        queue: QueueClient,
        source: str,
        subscribers: Sequence[QueueClient] = (),
        markers: TableClient | None = None,
    ) -> None:
        self._table = table
        self._queues = [queue, *subscribers]  # the public queue, then modules of this host that listen in
        self._source = source
        self._markers = markers

    def commit(
        self, stream: str, operations: Sequence[TransactionOperation], events: Iterable[NewEvent]
    ) -> list[CloudEvent]:
        """Apply ``operations`` and record ``events`` atomically in partition ``stream``."""
        return self.commit_batch(stream, operations, events)[0]

    def commit_batch(
        self,
        stream: str,
        operations: Sequence[TransactionOperation],
        events: Iterable[NewEvent],
    ) -> tuple[list[CloudEvent], list[Mapping[str, Any]]]:
        """:meth:`commit`, also returning each of ``operations``' metadata (its new ``etag``), in order.

        The stream's sequence row is not read when this process wrote it last:
        its number and ETag are remembered from that batch. A remembered row
        that another writer moved on fails only the sequence operation (412 at
        its index); then the row is read and the batch sent once more, which is
        what reading it first would have done. Any other failure is the
        caller's, as before (and forgets what was remembered).
        """
        pending = list(events)
        if not pending:
            return [], (self._submit(list(operations)) if operations else [])
        key = (table_identity(self._table), stream)
        remembered = _sequences.get(key)
        while True:
            if remembered is None:
                row = read_row(self._table, stream, SEQUENCE_ROW)
                current = (int(row["Last"]), str(row["etag"])) if row else None
            else:
                current = remembered
            last = current[0] if current else sequence_floor(self._markers)  # past a restore's loss
            now = clock.now_iso()
            cloud_events = [self._envelope(stream, event, last + n, now) for n, event in enumerate(pending, 1)]
            for event in cloud_events:
                _check_size(event)
            batch = list(operations) + [("create", self._outbox_entity(stream, e)) for e in cloud_events]
            # Events of this stream sent since its last commit ride along, marked dispatched (no extra call).
            room = min(MAX_MARKS_PER_BATCH, 99 - len(batch))
            marked = _marks.take(self._table, stream, room)
            batch += mark_operations(stream, marked)
            batch.append(self._sequence_operation(stream, current, last + len(pending)))
            self._mark(stream)
            try:
                results = self._submit(batch)
            except ConcurrencyConflict as conflict:
                _marks.give_back(self._table, stream, marked)
                _sequences.forget(key)
                cause = conflict.__cause__
                if (
                    remembered is not None
                    and isinstance(cause, TableTransactionError)
                    and cause.index == len(batch) - 1
                ):
                    remembered = None  # only the remembered sequence row was stale: read it, send again
                    continue
                raise
            except Exception:
                _marks.give_back(self._table, stream, marked)
                _sequences.forget(key)
                raise
            _sequences.put(key, (last + len(pending), str(results[-1]["etag"])))
            return cloud_events, list(results[: len(operations)])

    def dispatch(self, events: Iterable[CloudEvent]) -> None:
        """Send events now; failures are left for the dispatcher timer, never raised.

        While they are sent and marked, this process's dispatcher timer leaves
        them alone, so it does not send them a second time between the send and
        the mark. (Another instance's timer still may: delivery is at-least-once.)
        """
        sending = list(events)
        self.hold(sending)
        try:
            for event in sending:
                try:
                    self._send(event.stream, outbox_row_key(event.sequence), event.to_json())
                except Exception as error:  # noqa: BLE001 - the timer retries; the state change committed
                    log.warning("event %s left pending: %s", event.id, error)
                    return
        finally:
            self.unhold(sending)

    def hold(self, events: Iterable[CloudEvent]) -> None:
        """These committed events will be sent by :meth:`dispatch_marking_later`: the timer leaves them be."""
        for stream, sequences in _by_stream(events).items():
            _marks.hold(self._table, stream, sequences)

    def unhold(self, events: Iterable[CloudEvent]) -> None:
        """They will not be sent by this process after all: the dispatcher timer sends them."""
        for stream, sequences in _by_stream(events).items():
            _marks.drop(self._table, stream, sequences)

    def dispatch_marking_later(self, events: Sequence[CloudEvent]) -> None:
        """:meth:`dispatch`, leaving the marks to the stream's next commit (or a batch once it is quiet).

        For a background sender: the state change already committed, so this only costs calls.
        Failures are left for the dispatcher timer, never raised.
        """
        for position, event in enumerate(events):
            try:
                for queue in self._queues:
                    queue.send_message(event.to_json())
            except Exception as error:  # noqa: BLE001 - the timer retries; the state change already committed
                log.warning("event %s left pending: %s", event.id, error)
                self.unhold(events[position:])
                return
            _marks.sent(self._table, event.stream, event.sequence)

    def dispatch_pending(self, limit: int = 500) -> int:
        """Send events a crash left behind, oldest first per stream. Returns how many were sent."""
        if self._markers is None:  # no markers kept: look everywhere
            return self._send_pending(None, limit)
        sent = 0
        markers = self._markers.query_entities("PartitionKey eq @t", parameters={"t": self._table.table_name})
        for marker in markers:
            found = self._send_pending(marker["RowKey"], limit - sent)
            sent += found
            if found == 0:
                self._unmark(marker)
            if sent >= limit:
                break
        return sent

    def _send_pending(self, stream: str | None, limit: int) -> int:
        query = "RowKey ge @start and RowKey lt @end and Dispatched eq false"
        parameters = {"start": OUTBOX_PREFIX, "end": _OUTBOX_END}
        if stream is not None:
            query = "PartitionKey eq @stream and " + query
            parameters["stream"] = stream
        sent = 0
        for row in self._table.query_entities(query, parameters=parameters, results_per_page=max(1, limit)):
            if sent >= limit:
                break
            if _marks.holds(self._table, row["PartitionKey"], int(row["RowKey"][len(OUTBOX_PREFIX) :])):
                continue  # this process is sending it, or sent it and marks it soon
            self._send(row["PartitionKey"], row["RowKey"], row["Event"])
            sent += 1
        return sent

    def _mark(self, stream: str) -> None:
        """Upsert the stream's marker, unless this process did so less than ``MARKER_REFRESH`` ago.

        A marker touched at ``t`` survives until at least ``t + MARKER_GRACE``
        (the dispatcher removes only markers untouched that long, conditional on
        the ETag it read), and ``MARKER_REFRESH`` is well inside that, so a
        commit that skips the upsert still lands under a live marker.
        """
        if self._markers is None:
            return
        key = (self._markers.url, self._table.table_name, stream)
        marked = _marked.get(key)
        if marked is not None and time.monotonic() - marked < MARKER_REFRESH.total_seconds():
            return
        self._markers.upsert_entity({"PartitionKey": self._table.table_name, "RowKey": stream}, mode=UpdateMode.REPLACE)
        _marked.put(key, time.monotonic())

    def _unmark(self, marker: Any) -> None:
        if self._markers is not None:  # no markers kept: nothing to remove
            remove_stale_marker(self._markers, marker, clock.utcnow())

    def purge_dispatched(self, older_than: timedelta) -> int:
        cutoff = (clock.utcnow() - older_than).isoformat()
        query = "RowKey ge @start and RowKey lt @end and Dispatched eq true and DispatchedAt lt @cutoff"
        purged = 0
        for row in self._table.query_entities(
            query, parameters={"start": OUTBOX_PREFIX, "end": _OUTBOX_END, "cutoff": cutoff}
        ):
            self._table.delete_entity(row["PartitionKey"], row["RowKey"])
            purged += 1
        return purged

    def _send(self, stream: str, row_key: str, event_json: str) -> None:
        for queue in self._queues:
            queue.send_message(event_json)
        self._table.update_entity(
            {
                "PartitionKey": stream,
                "RowKey": row_key,
                "Dispatched": True,
                "DispatchedAt": clock.now_iso(),
            },
            mode=UpdateMode.MERGE,
        )

    def _envelope(self, stream: str, event: NewEvent, sequence: int, now: str) -> CloudEvent:
        tracing = current_trace_context()  # the Distributed Tracing extension: the trace that emitted it
        return CloudEvent(
            id=str(uuid.uuid4()),
            source=self._source,
            type=event.type,
            subject=event.subject,
            time=now,
            tenant=event.tenant,
            stream=stream,
            sequence=sequence,
            data=event.data,
            traceparent=tracing.get("traceparent"),
            tracestate=tracing.get("tracestate"),
        )

    @staticmethod
    def _outbox_entity(stream: str, event: CloudEvent) -> dict[str, Any]:
        return {
            "PartitionKey": stream,
            "RowKey": outbox_row_key(event.sequence),
            "EventId": event.id,
            "EventType": event.type,
            "Event": event.to_json(),
            "Dispatched": False,
            "CreatedAt": event.time,
        }

    @staticmethod
    def _sequence_operation(stream: str, current: tuple[int, str] | None, last: int) -> TransactionOperation:
        entity = {"PartitionKey": stream, "RowKey": SEQUENCE_ROW, "Last": last}
        if current is None:
            return ("create", entity)
        return (
            "update",
            entity,
            {"mode": UpdateMode.REPLACE, "etag": current[1], "match_condition": MatchConditions.IfNotModified},
        )

    def _submit(self, batch: list[TransactionOperation]) -> list[Mapping[str, Any]]:
        return submit_batch(self._table, batch)


# Per stream: the sequence row's number and ETag as this process's last commit left them; and when
# this process last touched the stream's pending marker.
_sequences: LruCache[tuple[str, str], tuple[int, str]] = LruCache(20_000)
_marked: LruCache[tuple[str, str, str], float] = LruCache(20_000)


def mark_operations(stream: str, sequences: Iterable[int]) -> list[TransactionOperation]:
    """A merge per event, as :meth:`Outbox._send` marks one: ``Dispatched`` and when (the purge reads it)."""
    now = clock.now_iso()
    return [
        (
            "upsert",
            {"PartitionKey": stream, "RowKey": outbox_row_key(sequence), "Dispatched": True, "DispatchedAt": now},
            {"mode": UpdateMode.MERGE},
        )
        for sequence in sequences
    ]


# Events this process sent in the background and has not marked yet (see shared.platform.events.sent_marks).
_marks = SentMarks(lambda stream, sequences: mark_operations(stream, sequences))
atexit.register(_marks.flush, 0.0)  # a clean stop writes its marks: the timer need not send those again


def _by_stream(events: Iterable[CloudEvent]) -> dict[str, list[int]]:
    streams: dict[str, list[int]] = {}
    for event in events:
        streams.setdefault(event.stream, []).append(event.sequence)
    return streams


def _check_size(event: CloudEvent) -> None:
    size = len(event.to_json().encode("utf-8"))
    if size > MAX_EVENT_BYTES:
        raise EventTooLarge(
            f"event {event.type} of {event.subject} is {size} bytes, over the {MAX_EVENT_BYTES} "
            "an event may hold: put what grows with the environment in a blob and reference it"
        )


def outbox_for(storage: StorageClients, table_name: str, source: str) -> Outbox:
    """The outbox of ``table_name``: the public events queue plus the table's subscriber queues."""
    subscribers = [storage.queue(name) for name in OUTBOX_SUBSCRIBERS.get(table_name, ())]
    return Outbox(
        storage.tables.get_table_client(table_name),
        storage.queue(EVENTS_QUEUE),
        source,
        subscribers,
        storage.tables.get_table_client(PENDING_TABLE),
    )


def undispatched_count(table: TableClient, limit: int) -> int:
    """How many events of ``table`` are not sent yet, counting at most ``limit`` (the backlog gauge's read)."""
    rows = table.query_entities(
        "RowKey ge @start and RowKey lt @end and Dispatched eq false",
        parameters={"start": OUTBOX_PREFIX, "end": _OUTBOX_END},
        select=["PartitionKey"],
        results_per_page=100,
    )
    pending = 0
    for _ in rows:
        pending += 1
        if pending >= limit:
            break
    return pending


def read_events(queue: QueueClient, max_messages: int = 32) -> list[dict[str, Any]]:
    """Peek at published events (for tests and diagnostics)."""
    return [json.loads(m.content) for m in queue.peek_messages(max_messages=max_messages)]


def remove_stale_marker(markers: TableClient, marker: Any, now: datetime) -> None:
    """Delete a pending marker once it is older than MARKER_GRACE and untouched since it was read.

    A younger one may belong to a writer between its marker and its commit; a changed one was
    touched again since: both are kept."""
    touched = marker.metadata.get("timestamp")
    if touched is None or now - touched < MARKER_GRACE:
        return
    try:
        markers.delete_entity(
            marker["PartitionKey"],
            marker["RowKey"],
            etag=marker.metadata["etag"],
            match_condition=MatchConditions.IfNotModified,
        )
    except (ResourceModifiedError, ResourceNotFoundError, HttpResponseError):
        pass  # touched again since: keep it
