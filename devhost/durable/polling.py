"""Receiving from a queue: at once when the host itself sent something, with back-off otherwise.

The engine sends most messages itself (work items, results, starts), and
hands those straight to its dispatchers when they have room (local delivery,
see ``queues``); what it sends visible instead (no room then, or a timer) wakes
its pollers, at once or when the timer is due, instead of waiting for the next
poll. Polling with back-off up to ``maxQueuePollingInterval`` only picks up
messages written by other processes and messages that became visible again
(what a crashed host was holding).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from azure.core.exceptions import AzureError
from azure.storage.queue import QueueMessage
from azure.storage.queue.aio import QueueClient

log = logging.getLogger("devhost.durable")

MIN_INTERVAL = 0.05
MAX_BATCH = 32  # the most one receive takes (the queue service's limit)


class QueuePoller:
    def __init__(
        self,
        queue: QueueClient,
        wake: asyncio.Event,
        visibility: float,
        max_interval: float,
        room: Callable[[], int],
        has_room: Callable[[], Awaitable[None]],
        give_back: Callable[[int], None] | None = None,
    ) -> None:
        """``room()`` says how many messages to receive at most (and may claim that room for them);
        ``give_back(n)`` returns the claim for the ``n`` of them that did not come."""
        self._queue = queue
        self._wake = wake
        self._visibility = visibility
        self._max_interval = max(MIN_INTERVAL, max_interval)
        self._room = room
        self._has_room = has_room
        self._give_back = give_back

    async def run(self, handle: Callable[[QueueMessage], Awaitable[None]]) -> None:
        interval = MIN_INTERVAL
        while True:
            await self._has_room()
            self._wake.clear()
            wanted = min(MAX_BATCH, self._room())
            received = await self._receive(wanted)
            if self._give_back is not None:
                self._give_back(wanted - len(received))
            for message in received:
                await handle(message)
            if received:
                interval = MIN_INTERVAL
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=interval * random.uniform(0.8, 1.0))
                interval = MIN_INTERVAL
            except TimeoutError:
                interval = min(self._max_interval, interval * 2)

    async def _receive(self, count: int) -> list[QueueMessage]:
        if count <= 0:
            return []
        try:
            pager = self._queue.receive_messages(max_messages=count, visibility_timeout=int(self._visibility))
            return [message async for message in pager]
        except AzureError as error:  # the store may be down: say so, keep polling
            log.warning("polling %s failed: %s", self._queue.queue_name, str(error).splitlines()[0])
            await asyncio.sleep(1.0)
            return []
