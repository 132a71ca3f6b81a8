"""Runs activity work items through the app's activity triggers.

An activity is called the way the Python worker calls it: its input decoded
by the SDK's ``ActivityTriggerConverter``, its return value encoded by the
same converter, any input bindings supplied by the host's invoker. At most
``maxConcurrentActivityFunctions`` run at once. The work item stays invisible
while its activity runs and is deleted only after the result (or failure)
has been sent to the instance, so a host killed mid-activity runs it again
(at least once). An activity that keeps killing the host is, after
``MAX_DEQUEUE`` attempts, reported to its orchestration as failed instead of
being retried forever.

Work items this host's own orchestrations send arrive by local delivery (see
``queues``) while there is room for them; the poller takes the rest, and
those other processes or a dead host left on the queue.
"""

from __future__ import annotations

import asyncio
import logging

from azure.functions import meta
from azure.functions.durable_functions import ActivityTriggerConverter
from azure.storage.queue import QueueMessage
from azure.storage.queue.aio import QueueClient

from devhost.durable import history as h
from devhost.durable.functions import DurableFunctions
from devhost.durable.polling import MAX_BATCH, QueuePoller
from devhost.durable.queues import ControlMessage, EngineMessage, HeldMessage, TaskHubQueues, WorkItem
from devhost.durable.settings import DurableSettings
from devhost.invoker import Invoker

log = logging.getLogger("devhost.durable")

MAX_DEQUEUE = 20


class ActivityFailure(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.message = message


class ActivityDispatcher:
    def __init__(
        self, settings: DurableSettings, queues: TaskHubQueues, functions: DurableFunctions, invoker: Invoker
    ) -> None:
        self._settings = settings
        self._queues = queues
        self._functions = functions
        self._invoker = invoker
        self._running: set[asyncio.Task[None]] = set()
        self._reserved = 0  # room claimed by a poll or a local delivery under way
        self._room_changed = asyncio.Event()
        self.visibility = settings.work_item_visibility

    async def run(self) -> None:
        poller = QueuePoller(
            self._queues.workitems,
            self._queues.work_wake,
            self._settings.work_item_visibility,
            self._settings.max_polling_interval,
            self._claim,
            self._wait_for_room,
            self._give_back,
        )
        self._queues.local_work = self
        try:
            await poller.run(self._received)
        finally:
            self._queues.local_work = None
            for task in self._running:
                task.cancel()

    def _room(self) -> int:
        return max(0, self._settings.max_concurrent_activities - len(self._running) - self._reserved)

    def _claim(self) -> int:
        """Room for a poll, claimed until its messages start (so local deliveries cannot take it meanwhile)."""
        room = min(MAX_BATCH, self._room())
        self._reserved += room
        return room

    def _give_back(self, unused: int) -> None:
        self._reserved -= unused
        if unused:
            self._room_changed.set()

    def reserve(self) -> bool:
        if self._room() <= 0:
            return False
        self._reserved += 1
        return True

    def cancel(self) -> None:
        self._reserved -= 1
        self._room_changed.set()

    def deliver(self, queue: QueueClient, message: QueueMessage, body: EngineMessage) -> None:
        self._reserved -= 1
        self._start(WorkItem.from_json(body), HeldMessage(queue, message, self.visibility, body))

    async def _wait_for_room(self) -> None:
        while self._room() == 0:
            self._room_changed.clear()
            await self._room_changed.wait()

    async def _received(self, message: QueueMessage) -> None:
        """A polled message (its room claimed by ``_claim`` until it starts)."""
        try:
            body = await self._queues.decode(message)
            item = WorkItem.from_json(body)
        except (ValueError, KeyError) as error:
            self._give_back(1)
            await self._queues.to_poison(self._queues.workitems, message, str(error))
            return
        except BaseException:  # the store went away reading a large payload: the message comes back
            self._give_back(1)
            raise
        self._reserved -= 1
        self._start(item, HeldMessage(self._queues.workitems, message, self.visibility, body))

    def _start(self, item: WorkItem, held: HeldMessage) -> None:
        task = asyncio.create_task(self._handle(item, held), name=f"activity {item.name}")
        self._running.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._room_changed.set()

    async def _handle(self, item: WorkItem, held: HeldMessage) -> None:
        try:
            await self._handle_held(item, held)
        except asyncio.CancelledError:  # the dispatcher stopped: the next host (or this one) runs it again
            held.abandon()
            raise

    async def _handle_held(self, item: WorkItem, held: HeldMessage) -> None:
        try:
            if held.dequeue_count > MAX_DEQUEUE:
                raise ActivityFailure(
                    "AbandonedException",
                    f"the work item was picked up {held.dequeue_count} "
                    "times without finishing (did the activity crash the host?)",
                )
            result = await self._run(item)
            event: h.TaskCompletedEvent | h.TaskFailedEvent = h.task_completed(h.now(), item.task_id, result)
        except ActivityFailure as failure:
            event = h.task_failed(
                h.now(),
                item.task_id,
                f"Activity function '{item.name}' failed: {failure.error_type}: {failure.message}",
                f"{failure.error_type}: {failure.message}",
                failure.error_type,
            )
        try:
            await self._queues.send_control(ControlMessage(item.instance_id, item.execution_id, event))
        except Exception:
            log.exception("could not report activity %s of %s; it will run again", item.name, item.instance_id)
            await held.release(1.0)
            return
        await held.delete()

    async def _run(self, item: WorkItem) -> str:
        function = self._functions.activity(item.name)
        if function is None:
            raise ActivityFailure(
                "FunctionNotFoundException", f"the activity function '{item.name}' does not exist in this app"
            )
        value = ActivityTriggerConverter.decode(
            meta.Datum(type="json", value=item.input or "null"), trigger_metadata=None
        )
        try:
            invocation = self._invoker.invoke(
                function,
                value,
                trace_parent=item.trace,
                span_name=f"activity:{item.name}",
                attributes={"durable.instance_id": item.instance_id, "durable.task_id": item.task_id},
            )
            returned = await asyncio.wait_for(invocation, timeout=self._settings.function_timeout)
        except TimeoutError:
            raise ActivityFailure(
                "FunctionTimeoutException", f"timed out after {self._settings.function_timeout:g} s (functionTimeout)"
            ) from None
        except Exception as error:
            log.warning(
                "activity %s of %s raised %s: %s",
                item.name,
                item.instance_id,
                type(error).__name__,
                error,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
            raise ActivityFailure(type(error).__name__, str(error)) from error
        try:
            return str(ActivityTriggerConverter.encode(returned, expected_type=None).value)
        except ValueError as error:
            raise ActivityFailure("SerializationException", str(error)) from error
