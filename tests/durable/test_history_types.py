"""The history events' literal type numbers are the SDK's, and events read back are checked (no host, no store).

``devhost.durable.history`` tags each event's TypedDict with its number as a
literal (the SDK's enum is untyped, so mypy cannot narrow on it); these numbers
must stay the SDK's, or the SDK would replay a history it misreads.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from azure.durable_functions.models.history import HistoryEventType
from azure.storage.blob.aio import ContainerClient
from azure.storage.queue import QueueMessage

from devhost.durable import history as h
from devhost.durable.payloads import PayloadStore
from devhost.durable.queues import ControlMessage, TaskHubQueues

AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    "name",
    [member.name for member in HistoryEventType if hasattr(h, member.name)],
)
def test_each_literal_type_number_is_the_sdks(name: str) -> None:
    assert getattr(h, name) == int(HistoryEventType[name])


def test_every_event_the_engine_writes_has_a_literal_number() -> None:
    written = {
        h.orchestrator_started(AT)["EventType"],
        h.execution_started(AT, "i", "e", "orchestrator", None)["EventType"],
        h.task_failed(AT, 0, "reason", "details", "ValueError")["EventType"],
        h.continue_as_new(AT, None)["EventType"],
        h.execution_resumed(AT, "")["EventType"],
    }
    assert written <= {getattr(h, member.name) for member in HistoryEventType if hasattr(h, member.name)}


def test_an_event_read_back_is_the_one_written() -> None:
    event = h.timer_fired(AT, 3, h.timestamp(AT))
    assert h.history_event(json.loads(json.dumps(event))) == event


@pytest.mark.parametrize("value", [None, [], {}, {"EventType": "5"}, {"EventType": 14}, {"EventType": 99}])
def test_anything_else_read_back_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="not a history event"):
        h.history_event(value)


def test_a_work_item_is_not_taken_for_a_control_message() -> None:
    body = {"kind": "activity", "instance": "i", "execution": "e", "task": 0, "name": "a", "input": None}
    with pytest.raises(ValueError, match="not a control message"):
        ControlMessage.from_json(body)


# Decoding touches no store unless the message points at a blob: the queues are never called here.
_NO_STORE = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;"
    "QueueEndpoint=http://127.0.0.1:9/devstoreaccount1;BlobEndpoint=http://127.0.0.1:9/devstoreaccount1"
)


async def _decode(body: object) -> object:
    payloads = PayloadStore(ContainerClient.from_connection_string(_NO_STORE, "payloads"))
    queues = TaskHubQueues(_NO_STORE, "hub", 1, payloads)
    try:
        return await queues.decode(QueueMessage(content=json.dumps(body)))
    finally:
        await queues.close()


def test_a_control_message_with_an_event_the_engine_does_not_write_is_unreadable() -> None:
    body = {"kind": "control", "instance": "i", "execution": None, "id": "m", "event": {"EventType": 14}}
    with pytest.raises(ValueError, match="not a history event"):
        asyncio.run(_decode(body))


def test_a_control_message_the_engine_wrote_decodes_as_written() -> None:
    message = ControlMessage("i", "e", h.event_raised(AT, "approval", '{"ok": true}'), "m")
    assert asyncio.run(_decode(message.to_json())) == message.to_json()
