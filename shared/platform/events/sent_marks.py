"""Events this process holds or has sent, not yet marked ``Dispatched`` in their outbox rows.

Why: marking each sent event with a write of its own cost a storage call per
event (the lease protocol emits two events a cycle, so two calls a cycle on
top of the two queue sends). A caller that sends its events in the background
(:meth:`shared.platform.events.outbox.Outbox.dispatch_marking_later`) instead leaves
the marks here, and they reach storage

- in the stream's next commit: the outbox adds a merge per mark to that
  batch (the rows are in the batch's partition), which costs no extra call;
- or, for a stream that stays quiet for :data:`MARK_DELAY_SECONDS`, in one
  batch of merges of its own, sent by a daemon thread.

Invariants:

- **A mark is only ever a claim that the event was sent.** An event enters
  here as *held* (queued for sending by this process) and becomes *sent* only
  after every queue accepted it; only *sent* events are marked.
- **The dispatcher timer skips what this process holds** (held or sent, for
  at most :data:`HOLD_SECONDS`), so it does not send again an event the
  background sender is about to send or has just sent. Another instance's
  timer does not know them: within the few seconds before the mark lands it
  may send one again, which at-least-once delivery allows (consumers dedupe
  by event id). An event whose send failed is dropped from here at once and
  left to the timer.
- **Nothing depends on this memory for correctness.** A process that dies
  loses its marks; the timer then sends those events again (at-least-once,
  as for a crash between commit and send). A mark whose batch fails is kept
  and tried again.
- **A mark never resurrects a row.** Marks are merges that create a missing
  row; outbox rows are deleted only after they were marked and aged
  (``purge_dispatched``), so the row is there when its own mark is written.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from azure.data.tables import TableClient

from shared.platform.logs import app_logger
from shared.platform.storage.conditional import submit_batch

log = app_logger("outbox")

MARK_DELAY_SECONDS = 2.0  # a stream quiet this long gets its sent events marked in a batch of their own
HOLD_SECONDS = 60.0  # the timer stops deferring to this process after this long, whatever happened
MAX_MARKS_PER_BATCH = 50  # a table batch holds at most 100 operations; leave room for the commit's own

Stream = tuple[str, str]  # (table identity, partition)
MarkOperations = Callable[[str, list[int]], list[tuple[Any, ...]]]  # (stream, sequences) -> batch operations


def table_identity(table: TableClient) -> str:
    """The table's own address. ``TableClient.url`` is the account's, shared by every table in it."""
    return f"{table.url.rstrip('/')}/{table.table_name}"


class SentMarks:
    """Per stream: sequence -> (since, sent). Thread-safe; the outbox keeps one per process.

    ``operations`` writes the marks of a stream's events (the outbox's merges).
    """

    def __init__(self, operations: MarkOperations) -> None:
        self._operations = operations
        self.delay = MARK_DELAY_SECONDS  # how quiet a stream must be before the flusher marks it
        self._streams: dict[Stream, dict[int, tuple[float, bool]]] = {}
        self._tables: dict[str, TableClient] = {}
        self._lock = threading.Lock()
        self._flusher: threading.Thread | None = None

    def hold(self, table: TableClient, stream: str, sequences: Iterable[int]) -> None:
        """These events will be sent by this process: the timer leaves them alone meanwhile."""
        now = time.monotonic()
        with self._lock:
            self._tables[table_identity(table)] = table
            held = self._streams.setdefault((table_identity(table), stream), {})
            for sequence in sequences:
                held.setdefault(sequence, (now, False))

    def sent(self, table: TableClient, stream: str, sequence: int) -> None:
        """Every queue took the event: it may be marked (the next commit, or the flusher)."""
        with self._lock:
            self._tables[table_identity(table)] = table
            self._streams.setdefault((table_identity(table), stream), {})[sequence] = (time.monotonic(), True)
        self._start_flusher()

    def drop(self, table: TableClient, stream: str, sequences: Iterable[int]) -> None:
        """Not sent after all: the dispatcher timer sends them."""
        with self._lock:
            held = self._streams.get((table_identity(table), stream))
            for sequence in sequences:
                if held is not None:
                    held.pop(sequence, None)

    def holds(self, table: TableClient, stream: str, sequence: int) -> bool:
        """Is this process sending (or has it sent) the event, recently enough to be trusted?"""
        with self._lock:
            entry = self._streams.get((table_identity(table), stream), {}).get(sequence)
        return entry is not None and time.monotonic() - entry[0] < HOLD_SECONDS

    def take(self, table: TableClient, stream: str, room: int, older_than: float = 0.0) -> list[int]:
        """Up to ``room`` sent events of the stream, removed from here (give them back if the write fails)."""
        cutoff = time.monotonic() - older_than
        with self._lock:
            held = self._streams.get((table_identity(table), stream))
            if not held:
                return []
            taken = sorted(s for s, (since, sent) in held.items() if sent and since <= cutoff)[: max(0, room)]
            for sequence in taken:
                del held[sequence]
            if not held:
                del self._streams[(table_identity(table), stream)]
            return taken

    def give_back(self, table: TableClient, stream: str, sequences: list[int]) -> None:
        """The batch carrying these marks failed: keep them for the next one."""
        if sequences:
            now = time.monotonic()
            with self._lock:
                held = self._streams.setdefault((table_identity(table), stream), {})
                for sequence in sequences:
                    held.setdefault(sequence, (now, True))

    def flush(self, older_than: float | None = None) -> int:
        """Mark the sent events of streams that had no commit to carry them (for ``delay``). Returns how many."""
        older_than = self.delay if older_than is None else older_than
        with self._lock:
            due = [
                key
                for key, held in self._streams.items()
                if any(sent and time.monotonic() - since >= older_than for since, sent in held.values())
            ]
        marked = 0
        for identity, stream in due:
            table = self._tables[identity]
            while sequences := self.take(table, stream, MAX_MARKS_PER_BATCH * 2, older_than):
                try:
                    submit_batch(table, self._operations(stream, sequences))
                    marked += len(sequences)
                except Exception as error:  # noqa: BLE001 - kept and tried again; the timer covers a lost process
                    self.give_back(table, stream, sequences)
                    log.warning("outbox %s/%s: %d mark(s) not written: %s", identity, stream, len(sequences), error)
                    break
        return marked

    def _start_flusher(self) -> None:
        if self._flusher is not None:
            return
        with self._lock:
            if self._flusher is not None:
                return
            self._flusher = threading.Thread(target=self._run, name="outbox-marks", daemon=True)
            self._flusher.start()

    def _run(self) -> None:
        while True:
            time.sleep(min(self.delay, MARK_DELAY_SECONDS) / 2)
            self.flush()
