"""The task hub's queues: control queues for instances, one work-item queue for activities.

As in the Azure Storage provider: ``<hub>-control-NN`` carry the messages for
orchestration instances (an instance always maps to the same partition, so
its messages are handled in one place), ``<hub>-workitems`` carries activity
work items, and a durable timer is a message on the instance's control queue
that stays invisible until the timer is due. A message the host receives
stays invisible while it is being handled and is deleted only after its
effects are recorded, so a host killed at any point leaves it to be handled
again (at least once).

Local delivery. A message this host sends to itself, when the receiving
dispatcher has room for it, is sent already invisible (for the queue's
visibility timeout) and handed straight to that dispatcher, as though the
dispatcher had received it the moment it was sent: it saves the receive and
the wait for a poll. On the queue it is exactly a received message: held
invisible while it is handled, deleted after its effects are recorded, and
back after the visibility timeout if the host dies first. Only the host that
holds the task hub's lease runs dispatchers, so only it delivers locally.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Literal, NotRequired, Protocol, TypedDict, cast

from azure.core.exceptions import AzureError, HttpResponseError, ResourceExistsError
from azure.storage.queue import QueueMessage
from azure.storage.queue.aio import QueueClient

from devhost.durable.history import HistoryEvent, history_event
from devhost.durable.payloads import INLINE_LIMIT, PayloadStore
from devhost.json_value import JsonObject
from devhost.tracing import TraceCarrier, carrier_of
from storage_protocol.client_options import client_options

log = logging.getLogger("devhost.durable")

MAX_DELAY_SECONDS = 7 * 24 * 3600 - 60  # queue visibility limit (7 days), with a margin


class ControlMessageJson(TypedDict):
    """A control queue message's body."""

    kind: Literal["control"]
    instance: str
    execution: str | None
    event: HistoryEvent
    id: str


class WorkItemJson(TypedDict):
    """A work-item queue message's body."""

    kind: Literal["activity"]
    instance: str
    execution: str
    task: int
    name: str
    input: str | None  # JSON text of the activity's input
    trace: NotRequired[TraceCarrier]


EngineMessage = ControlMessageJson | WorkItemJson


class BlobPointer(TypedDict):
    """What a message too large for the queue carries instead: the blob holding its body."""

    blob: str


@dataclass
class ControlMessage:
    """A history event for an instance (the Durable Task Framework's ``TaskMessage``).

    ``execution_id`` is the execution the event belongs to (a task result, a
    timer); ``None`` means whichever execution is current (an external event,
    terminate, suspend, resume).
    """

    instance_id: str
    execution_id: str | None
    event: HistoryEvent
    message_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def to_json(self) -> ControlMessageJson:
        return {
            "kind": "control",
            "instance": self.instance_id,
            "execution": self.execution_id,
            "event": self.event,
            "id": self.message_id,
        }

    @classmethod
    def from_json(cls, data: EngineMessage) -> ControlMessage:
        """``ValueError`` for a work item (not a control message)."""
        if data["kind"] != "control":
            raise ValueError(f"a {data['kind']} message is not a control message")
        return cls(data["instance"], data.get("execution"), history_event(dict(data["event"])), data["id"])


@dataclass
class WorkItem:
    """An activity to run, and where its result goes."""

    instance_id: str
    execution_id: str
    task_id: int
    name: str
    input: str | None
    trace: TraceCarrier = field(default_factory=TraceCarrier)  # of the episode that scheduled it

    def to_json(self) -> WorkItemJson:
        document: WorkItemJson = {
            "kind": "activity",
            "instance": self.instance_id,
            "execution": self.execution_id,
            "task": self.task_id,
            "name": self.name,
            "input": self.input,
        }
        if self.trace:
            document["trace"] = self.trace
        return document

    @classmethod
    def from_json(cls, data: EngineMessage) -> WorkItem:
        """``ValueError`` for a control message (not a work item)."""
        if data["kind"] != "activity":
            raise ValueError(f"a {data['kind']} message is not a work item")
        trace = data.get("trace")
        return cls(
            str(data["instance"]),
            str(data["execution"]),
            int(data["task"]),
            str(data["name"]),
            data.get("input"),
            carrier_of({str(k): str(v) for k, v in trace.items()}) if isinstance(trace, dict) else {},
        )


class LocalReceiver(Protocol):
    """A dispatcher of this host that takes messages sent to its queue without polling for them."""

    visibility: float

    def reserve(self) -> bool:
        """Take room for one message now (before the send); ``False`` when there is none."""

    def cancel(self) -> None:
        """Give back a reservation whose send failed."""

    def deliver(self, queue: QueueClient, message: QueueMessage, body: EngineMessage) -> None:
        """Take a message sent invisible on ``queue`` (``body`` already decoded) as though received."""


class TaskHubQueues:
    def __init__(self, connection_string: str, prefix: str, partitions: int, payloads: PayloadStore) -> None:
        self.partitions = partitions
        self._payloads = payloads
        self._options = client_options()
        self.control = [
            QueueClient.from_connection_string(connection_string, f"{prefix}-control-{p:02d}", **self._options)
            for p in range(partitions)
        ]
        self.workitems = QueueClient.from_connection_string(connection_string, f"{prefix}-workitems", **self._options)
        self._connection_string = connection_string
        self.control_wake = [asyncio.Event() for _ in range(partitions)]
        self.work_wake = asyncio.Event()
        self._poison: dict[str, QueueClient] = {}
        # the dispatchers running in this host (while it holds the hub's lease)
        self.local_control: LocalReceiver | None = None
        self.local_work: LocalReceiver | None = None

    async def ensure(self) -> None:
        for queue in [*self.control, self.workitems]:
            await _ensure(queue)

    async def close(self) -> None:
        for queue in [*self.control, self.workitems, *self._poison.values()]:
            await queue.close()

    def partition_of(self, instance_id: str) -> int:
        return zlib.crc32(instance_id.encode("utf-8")) % self.partitions

    async def send_control(self, message: ControlMessage, delay: float = 0.0) -> None:
        partition = self.partition_of(message.instance_id)
        queue, body = self.control[partition], message.to_json()
        if delay <= 0 and await self._deliver_locally(self.local_control, queue, body, message.instance_id):
            return
        await self._send(queue, body, message.instance_id, delay)
        self._wake(self.control_wake[partition], delay)

    async def send_work_item(self, item: WorkItem) -> None:
        body = item.to_json()
        if await self._deliver_locally(self.local_work, self.workitems, body, item.instance_id):
            return
        await self._send(self.workitems, body, item.instance_id, 0.0)
        self.work_wake.set()

    async def _deliver_locally(
        self, receiver: LocalReceiver | None, queue: QueueClient, body: EngineMessage, instance_id: str
    ) -> bool:
        """Send ``body`` invisible and hand it to ``receiver``; ``False`` (nothing sent) if it has no room."""
        if receiver is None or not receiver.reserve():
            return False
        try:
            sent = await self._send(queue, body, instance_id, 0.0, hidden=receiver.visibility)
        except BaseException:
            receiver.cancel()
            raise
        receiver.deliver(queue, sent, body)
        return True

    async def decode(self, message: QueueMessage) -> EngineMessage:
        """The message body; raises ``ValueError`` for a message that is not the engine's."""
        body = _json_object(message.content)
        if "blob" in body:
            body = _json_object(await self._payloads.get(str(body["blob"])))
        if body.get("kind") not in ("control", "activity"):
            raise ValueError("not a Durable engine message")
        if body["kind"] == "control":
            history_event(body.get("event"))  # one the engine does not write is kept aside, as unreadable
        # The engine is the only writer of these queues: the kind says which of its two bodies this is
        # (each reader then takes the members it needs, and a control message's event is checked).
        return cast(EngineMessage, body)

    async def to_poison(self, queue: QueueClient, message: QueueMessage, reason: str) -> None:
        """Keep a message the engine cannot read, with the reason, in ``<queue>-poison``."""
        name = f"{queue.queue_name}-poison"
        if name not in self._poison:
            self._poison[name] = QueueClient.from_connection_string(self._connection_string, name, **self._options)
            await _ensure(self._poison[name])
        log.error("message %s on %s cannot be handled (%s); moved to %s", message.id, queue.queue_name, reason, name)
        await self._poison[name].send_message(message.content, time_to_live=-1)
        await queue.delete_message(message.id, message.pop_receipt)

    async def _send(
        self, queue: QueueClient, body: EngineMessage, instance_id: str, delay: float, hidden: float = 0.0
    ) -> QueueMessage:
        """Send ``body``; visible after ``delay`` seconds, or, if ``hidden``, invisible as a received message is."""
        text = json.dumps(body)
        if len(text) > INLINE_LIMIT:
            pointer: BlobPointer = {"blob": await self._payloads.put(instance_id, "message", text)}
            text = json.dumps(pointer)
        # Whole seconds only: a timer message shows up to a second early and is held until due.
        visibility = min(MAX_DELAY_SECONDS, math.floor(delay)) if delay >= 1 else None
        if hidden:
            visibility = math.ceil(hidden)
        return await queue.send_message(text, visibility_timeout=visibility, time_to_live=-1)

    @staticmethod
    def _wake(event: asyncio.Event, delay: float) -> None:
        if delay <= 0:
            event.set()
        elif delay <= MAX_DELAY_SECONDS:
            asyncio.get_running_loop().call_later(math.floor(delay) + 0.05, event.set)


class HeldMessage:
    """A received message kept invisible until it is deleted or let go.

    Every renewal answers a new pop receipt and only the latest one can delete
    the message, so a renewal is never cut off in flight: stopping waits for
    the one under way to answer (a renewal cancelled after the store applied
    it would leave a stale receipt, the delete would fail, and the message
    would come back and be handled twice).
    """

    def __init__(self, queue: QueueClient, message: QueueMessage, visibility: float, body: EngineMessage) -> None:
        self.queue = queue
        self.message = message
        self.body = body
        self._visibility = visibility
        self._receipt = message.pop_receipt
        self._stopping = asyncio.Event()
        self._renewer = asyncio.create_task(self._keep_invisible())

    @property
    def dequeue_count(self) -> int:
        return int(self.message.dequeue_count or 1)

    async def _keep_invisible(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._stopping.wait(), timeout=self._visibility / 3)
                return
            except TimeoutError:
                pass
            try:
                receipt = await self.queue.update_message(
                    self.message.id, self._receipt, visibility_timeout=math.ceil(self._visibility)
                )
            except HttpResponseError as error:
                if error.status_code in (400, 404):
                    return  # deleted meanwhile, or the receipt is stale: nothing left to hold
                log.warning("could not renew message %s: %s", self.message.id, error.reason)
                continue
            except AzureError as error:  # the store is unreachable; try again at the next beat
                log.warning("could not renew message %s: %s", self.message.id, error)
                continue
            except Exception as error:  # noqa: BLE001 - the host is stopping (its clients are closed): let the message go
                log.debug("stopped renewing message %s: %s", self.message.id, error)
                return
            self._receipt = receipt.pop_receipt

    async def _stop(self) -> None:
        self._stopping.set()
        # a renewal under way answers well within the visibility timeout, or the message is lost anyway
        await asyncio.wait({self._renewer}, timeout=self._visibility)
        self._renewer.cancel()
        await asyncio.gather(self._renewer, return_exceptions=True)

    def abandon(self) -> None:
        """Stop holding the message, with no call to the store: it shows again once its current hold
        lapses. For a handler cancelled because its dispatcher stopped (the hub's lease lost, the
        extension restarting): the renewer is a task of its own, and left running it would keep the
        message hidden for as long as this process lives, so no host would ever handle it."""
        self._stopping.set()
        self._renewer.cancel()

    async def delete(self) -> None:
        await self._stop()
        try:
            await self.queue.delete_message(self.message.id, self._receipt)
        except HttpResponseError as error:  # gone, or our receipt went stale: it comes back, and is deduped
            log.debug("message %s could not be deleted: %s", self.message.id, error.reason)

    async def release(self, delay: float = 0.0) -> None:
        """Let the message be received again after ``delay`` seconds."""
        await self._stop()
        try:
            await self.queue.update_message(self.message.id, self._receipt, visibility_timeout=math.ceil(delay))
        except HttpResponseError:
            pass  # it becomes visible again when its current lease runs out


async def _ensure(queue: QueueClient) -> None:
    try:
        await queue.create_queue()
    except ResourceExistsError:
        pass


def _json_object(text: str | bytes) -> JsonObject:
    """A JSON object's members; ``ValueError`` for anything else (not JSON, or JSON that is not an object)."""
    try:
        value = json.loads(text)
    except (TypeError, json.JSONDecodeError) as error:
        raise ValueError("not JSON") from error
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    object_: JsonObject = value
    return object_
