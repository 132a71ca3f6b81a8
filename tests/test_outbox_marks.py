"""Events sent in the background are marked dispatched by the stream's next commit, or in one batch.

Against Azurite, with the real outbox: what storage holds after each step, and
what the dispatcher timer (``dispatch_pending``) would send.
"""

from __future__ import annotations

import json
import uuid

import pytest
from azure.data.tables import TableServiceClient
from azure.storage.queue import QueueClient, TextBase64DecodePolicy, TextBase64EncodePolicy

from shared.platform.events import outbox as outbox_module
from shared.platform.events.cloudevents import NewEvent
from shared.platform.events.outbox import Outbox, outbox_row_key


@pytest.fixture
def parts(azurite, monkeypatch):
    # Only the test says when a quiet stream is flushed (the flusher thread would otherwise after 2 s).
    monkeypatch.setattr(outbox_module._marks, "delay", 3600.0)
    name = f"marks{uuid.uuid4().hex[:8]}"
    service = TableServiceClient.from_connection_string(azurite.connection_string())
    table = service.create_table(name)
    queue = QueueClient.from_connection_string(
        azurite.connection_string(),
        name,
        message_encode_policy=TextBase64EncodePolicy(),
        message_decode_policy=TextBase64DecodePolicy(),
    )
    queue.create_queue()
    markers = service.create_table(name + "marks")
    return table, queue, Outbox(table, queue, "/runtime-cloud", markers=markers)


def event(subject: str) -> NewEvent:
    return NewEvent("LeaseGranted", subject, "tenant-a")


def dispatched(table, stream: str, sequence: int) -> bool:
    return bool(table.get_entity(stream, outbox_row_key(sequence))["Dispatched"])


def sent_ids(queue) -> list[str]:
    return [json.loads(m.content)["id"] for m in queue.peek_messages(max_messages=32)]


def test_the_next_commit_of_the_stream_marks_the_events_sent_before_it(parts):
    table, queue, outbox = parts
    first = outbox.commit("s", [], [event("leases/1"), event("leases/2")])
    outbox.hold(first)
    outbox.dispatch_marking_later(first)

    assert sent_ids(queue) == [e.id for e in first]
    assert not dispatched(table, "s", 1)  # no write of its own yet
    assert outbox.dispatch_pending() == 0  # this process sent them: the timer leaves them alone

    second = outbox.commit("s", [("create", {"PartitionKey": "s", "RowKey": "state", "V": 1})], [event("leases/3")])

    assert dispatched(table, "s", 1) and dispatched(table, "s", 2)  # carried by the commit's own batch
    assert table.get_entity("s", outbox_row_key(1))["DispatchedAt"]  # what the purge's cutoff reads
    assert not dispatched(table, "s", second[0].sequence)  # not sent yet, so not marked
    assert table.get_entity("s", "state")["V"] == 1


def test_a_quiet_stream_gets_its_marks_in_one_batch_of_their_own(parts):
    table, queue, outbox = parts
    events = outbox.commit("quiet", [], [event("leases/1"), event("leases/2")])
    outbox.dispatch_marking_later(events)

    assert outbox_module._marks.flush(older_than=0.0) >= 2  # what the flusher thread does after a quiet spell

    assert dispatched(table, "quiet", 1) and dispatched(table, "quiet", 2)
    outbox_module._marks.drop(table, "quiet", [1, 2])  # even a process that forgot them sends nothing again
    assert outbox.dispatch_pending() == 0
    assert sent_ids(queue) == [e.id for e in events]  # each sent once


def test_events_held_for_the_background_sender_are_not_sent_by_this_process_timer(parts):
    _, queue, outbox = parts
    events = outbox.commit("held", [], [event("leases/1")])
    outbox.hold(events)  # queued for the background sender, not sent yet

    assert outbox.dispatch_pending() == 0
    assert sent_ids(queue) == []

    outbox.unhold(events)  # the backlog was full: left to the timer after all
    assert outbox.dispatch_pending() == 1
    assert sent_ids(queue) == [events[0].id]


def test_an_event_whose_send_failed_is_left_to_the_timer_and_never_marked(parts):
    table, queue, outbox = parts
    events = outbox.commit("failing", [], [event("leases/1"), event("leases/2")])
    outbox.hold(events)
    queue.delete_queue()  # the send fails (the queue is gone)

    outbox.dispatch_marking_later(events)  # never raises
    outbox.commit("failing", [], [event("leases/3")])

    assert not dispatched(table, "failing", 1) and not dispatched(table, "failing", 2)
    queue.create_queue()
    assert outbox.dispatch_pending() == 3  # the two that failed, and the third nobody sent
    assert dispatched(table, "failing", 1)


def test_another_process_without_the_marks_would_send_them_again_at_least_once(parts):
    """What a crash costs: marks live in memory, so a lost process's sent events are sent again."""
    table, queue, outbox = parts
    events = outbox.commit("lost", [], [event("leases/1")])
    outbox.dispatch_marking_later(events)
    outbox_module._marks.take(table, "lost", 10)  # the process dies before any commit or flush marks it

    assert outbox.dispatch_pending() == 1
    assert sent_ids(queue) == [events[0].id, events[0].id]  # the same id twice: consumers dedupe by id


def test_two_tables_of_one_account_keep_their_marks_and_sequences_apart(parts, azurite):
    """``TableClient.url`` names the account, not the table: marks of one table never land in another."""
    leases, queue, background = parts
    service = TableServiceClient.from_connection_string(azurite.connection_string())
    runs = service.create_table(f"runs{uuid.uuid4().hex[:8]}")
    direct = Outbox(runs, queue, "/runtime-cloud")
    sent = background.commit("shared-stream", [], [event("leases/1")])
    background.dispatch_marking_later(sent)
    direct.dispatch(direct.commit("other-stream", [], [event("runs/1")]))  # holds its own events meanwhile

    assert outbox_module._marks.flush(older_than=0.0) >= 1

    assert dispatched(leases, "shared-stream", 1)
    assert [row["RowKey"] for row in runs.query_entities("PartitionKey eq 'shared-stream'")] == []
    # The same stream name in the other table starts its own sequence (nothing remembered from the first).
    assert [e.sequence for e in direct.commit("shared-stream", [], [event("runs/2")])] == [1]
