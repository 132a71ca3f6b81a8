"""The outbox against Azurite: atomic with the state change, gap-free sequences, at-least-once."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from azure.core import MatchConditions
from azure.data.tables import TableServiceClient
from azure.storage.queue import QueueClient, TextBase64DecodePolicy, TextBase64EncodePolicy

from shared.platform.errors import AlreadyExists, ConcurrencyConflict
from shared.platform.events.cloudevents import NewEvent
from shared.platform.events.outbox import Outbox


@pytest.fixture
def outbox_parts(azurite):
    name = f"outboxtest{uuid.uuid4().hex[:8]}"
    table = TableServiceClient.from_connection_string(azurite.connection_string()).create_table(name)
    queue = QueueClient.from_connection_string(
        azurite.connection_string(),
        name,
        message_encode_policy=TextBase64EncodePolicy(),
        message_decode_policy=TextBase64DecodePolicy(),
    )
    queue.create_queue()
    markers = TableServiceClient.from_connection_string(azurite.connection_string()).create_table(name + "marks")
    return table, queue, Outbox(table, queue, "/runtime-cloud", markers=markers)


def state_row(stream: str, key: str) -> tuple:
    return ("create", {"PartitionKey": stream, "RowKey": key, "State": "applied"})


def test_events_commit_with_the_state_change_and_are_sent_as_cloudevents(outbox_parts):
    table, queue, outbox = outbox_parts
    events = outbox.commit(
        "tenant-a|prod",
        [state_row("tenant-a|prod", "run-1")],
        [
            NewEvent("ProvisioningApplied", "runs/run-1", "tenant-a", {"run": "run-1"}),
            NewEvent("SpecificationDeclared", "environments/prod", "tenant-a"),
        ],
    )
    outbox.dispatch(events)

    assert table.get_entity("tenant-a|prod", "run-1")["State"] == "applied"
    sent = [json.loads(m.content) for m in queue.peek_messages(max_messages=10)]
    assert [e["sequence"] for e in sent] == [1, 2]
    assert sent[0]["specversion"] == "1.0"
    assert sent[0]["type"] == "factory.runtime-cloud.ProvisioningApplied"
    assert sent[0]["tenant"] == "tenant-a" and sent[0]["data"] == {"run": "run-1"}
    assert outbox.dispatch_pending() == 0  # both were marked dispatched


def test_a_failed_state_change_records_no_event(outbox_parts):
    table, queue, outbox = outbox_parts
    outbox.commit("s", [state_row("s", "run-1")], [])

    with pytest.raises(AlreadyExists):
        outbox.commit("s", [state_row("s", "run-1")], [NewEvent("ProvisioningApplied", "runs/run-1", "t")])

    assert outbox.dispatch_pending() == 0
    assert queue.peek_messages() == []


def test_events_a_crash_left_behind_are_sent_by_the_dispatcher(outbox_parts):
    _, queue, outbox = outbox_parts
    outbox.commit("s", [], [NewEvent("LeaseGranted", "leases/1", "t"), NewEvent("LeaseReleased", "leases/1", "t")])

    assert outbox.dispatch_pending() == 2  # nobody called dispatch: as if the writer died after the commit
    assert outbox.dispatch_pending() == 0  # found through the stream's marker, sent once

    assert [json.loads(m.content)["type"] for m in queue.peek_messages(max_messages=10)] == [
        "factory.runtime-cloud.LeaseGranted",
        "factory.runtime-cloud.LeaseReleased",
    ]


def test_the_timer_of_the_sending_process_does_not_send_an_event_again_between_its_send_and_its_mark(
    outbox_parts,
):
    table, queue, outbox = outbox_parts
    timer_sent: list[int] = []

    class TimerFiresMidSend:
        """The public queue; the dispatcher timer fires right after each send, before the mark."""

        def send_message(self, content: str) -> None:
            queue.send_message(content)
            timer_sent.append(Outbox(table, queue, "/runtime-cloud", markers=outbox._markers).dispatch_pending())

    sender = Outbox(table, TimerFiresMidSend(), "/runtime-cloud", markers=outbox._markers)  # type: ignore[arg-type]
    events = sender.commit("s", [], [NewEvent("ProvisioningApplied", "runs/1", "t"), NewEvent("X", "runs/1", "t")])
    sender.dispatch(events)

    assert timer_sent == [0, 0]
    assert [json.loads(m.content)["sequence"] for m in queue.peek_messages(max_messages=10)] == [1, 2]
    assert outbox.dispatch_pending() == 0  # both marked; the holds are gone with the dispatch


def test_an_event_whose_send_failed_is_left_to_the_timer_of_the_same_process(outbox_parts):
    table, queue, outbox = outbox_parts

    class Down:
        def send_message(self, content: str) -> None:
            raise ConnectionError("queue unreachable")

    sender = Outbox(table, Down(), "/runtime-cloud", markers=outbox._markers)  # type: ignore[arg-type]
    sender.dispatch(sender.commit("s", [], [NewEvent("ProvisioningApplied", "runs/1", "t")]))

    assert queue.peek_messages() == []
    assert outbox.dispatch_pending() == 1  # no hold outlives the failed dispatch
    assert json.loads(queue.peek_messages()[0].content)["sequence"] == 1


def test_racing_writers_of_one_stream_get_gap_free_sequences(outbox_parts):
    table, _, outbox = outbox_parts

    def write(index: int) -> None:
        while True:
            try:
                outbox.commit("race", [], [NewEvent("PoolResized", f"pools/{index}", "t")])
                return
            except ConcurrencyConflict:
                continue  # lost the race for the sequence row: retry with fresh state
            except AlreadyExists:
                continue  # both created the first sequence row: retry

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(write, range(24)))

    rows = table.query_entities("PartitionKey eq 'race' and RowKey ge '~outbox|' and RowKey lt '~outbox}'")
    sequences = sorted(json.loads(row["Event"])["sequence"] for row in rows)
    assert sequences == list(range(1, 25))


def test_a_sequence_row_another_writer_moved_is_read_again_and_the_batch_sent_once_more(outbox_parts):
    """The sequence row is remembered from this process's last commit, not read each time; another
    process's commit (here a direct write) makes the remembered ETag stale, and the sequence continues."""
    table, _, outbox = outbox_parts
    outbox.commit("s", [], [NewEvent("PoolResized", "pools/1", "t")])
    table.upsert_entity({"PartitionKey": "s", "RowKey": "~outbox-sequence", "Last": 7})  # another host's commit

    [event] = outbox.commit("s", [state_row("s", "run-2")], [NewEvent("PoolResized", "pools/2", "t")])
    [again] = outbox.commit("s", [], [NewEvent("PoolResized", "pools/3", "t")])

    assert (event.sequence, again.sequence) == (8, 9)
    assert table.get_entity("s", "run-2")["State"] == "applied"
    assert table.get_entity("s", "~outbox-sequence")["Last"] == 9


def test_a_stale_caller_write_still_conflicts_when_the_sequence_row_is_remembered(outbox_parts):
    table, _, outbox = outbox_parts
    table.create_entity({"PartitionKey": "s", "RowKey": "slot", "Held": 0})
    read = table.get_entity("s", "slot")
    outbox.commit("s", [], [NewEvent("PoolResized", "pools/1", "t")])
    table.update_entity({"PartitionKey": "s", "RowKey": "slot", "Held": 1})  # someone else moved the row on
    stale = (
        "update",
        {"PartitionKey": "s", "RowKey": "slot", "Held": 2},
        {"mode": "replace", "etag": read.metadata["etag"], "match_condition": MatchConditions.IfNotModified},
    )

    with pytest.raises(ConcurrencyConflict):
        outbox.commit("s", [stale], [NewEvent("PoolResized", "pools/2", "t")])

    assert table.get_entity("s", "slot")["Held"] == 1
    [event] = outbox.commit("s", [], [NewEvent("PoolResized", "pools/3", "t")])
    assert event.sequence == 2  # nothing of the failed batch landed; no gap


def test_commit_batch_returns_the_callers_operations_etags(outbox_parts):
    table, _, outbox = outbox_parts
    _, results = outbox.commit_batch("s", [state_row("s", "run-1")], [NewEvent("PoolResized", "pools/1", "t")])
    assert [r["etag"] for r in results] == [table.get_entity("s", "run-1").metadata["etag"]]
