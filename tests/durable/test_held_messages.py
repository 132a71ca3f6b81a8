"""A dispatcher that stops lets go of the messages it held (found by the chaos run, ``make chaos``).

A host's Durable extension restarts in the same process when it loses the task hub's lease or a loop
fails. Its dispatchers' handlers are cancelled then, but each held message's renewer is a task of its
own: left running, it kept the message hidden for as long as the process lived, so no host ever ran
that activity again and its orchestration waited forever (a run stuck ``planning``). Here an activity
dispatcher runs in this process against the tests' Azurite with an activity that never returns; the
dispatcher is cancelled, and its work item must show again once its visibility timeout lapses.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from azure.storage.blob.aio import ContainerClient

from devhost.durable.activities import ActivityDispatcher
from devhost.durable.payloads import PayloadStore
from devhost.durable.queues import TaskHubQueues, WorkItem
from devhost.durable.settings import DurableSettings

VISIBILITY = 2.0  # seconds a held message stays hidden after its last renewal


class _Functions:
    """The app's activity catalogue, as far as the dispatcher asks (one activity, by any name)."""

    def activity(self, name: str) -> Any:
        return object()


class _HangingInvoker:
    """An activity that never returns: the dispatcher stops while it runs."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def invoke(self, *args: Any, **kwargs: Any) -> Any:
        self.started.set()
        await asyncio.Event().wait()


async def _work_item_shows_again(connection_string: str) -> bool:
    hub = f"held{uuid.uuid4().hex[:10]}"
    settings = DurableSettings(hub_name=hub, work_item_visibility=VISIBILITY, max_polling_interval=0.5)
    payloads = PayloadStore(ContainerClient.from_connection_string(connection_string, f"{hub}-payloads"))
    queues = TaskHubQueues(connection_string, hub, 1, payloads)
    await queues.ensure()
    invoker = _HangingInvoker()
    dispatcher = ActivityDispatcher(settings, queues, _Functions(), invoker)  # type: ignore[arg-type]
    running = asyncio.create_task(dispatcher.run())
    try:
        await asyncio.sleep(0.2)  # the dispatcher takes its place as the local receiver of work items
        await queues.send_work_item(WorkItem("instance-1", "execution-1", 0, "hangs", '"input"'))
        await asyncio.wait_for(invoker.started.wait(), timeout=30)
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        # The held renewal beats every VISIBILITY / 3 s; a message let go shows again after VISIBILITY s.
        for _ in range(int(6 * VISIBILITY / 0.5)):
            await asyncio.sleep(0.5)
            if (await queues.workitems.get_queue_properties()).approximate_message_count and [
                message async for message in queues.workitems.receive_messages(max_messages=1, visibility_timeout=30)
            ]:
                return True
        return False
    finally:
        await queues.close()
        await payloads._container.close()


def test_an_activity_s_work_item_shows_again_after_its_dispatcher_is_cancelled_mid_activity(azurite):
    assert asyncio.run(_work_item_shows_again(azurite.connection_string()))
