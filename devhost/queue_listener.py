"""Queue triggers: poll Azurite the way the Functions queue extension does.

- Messages are base64 by default (host.json ``messageEncoding``).
- While a function runs, the message stays invisible (its visibility is renewed),
  so a host killed mid-function lets the message reappear shortly after.
- A failed message becomes visible again after ``visibilityTimeout``; once it has
  been dequeued ``maxDequeueCount`` times it moves to ``<queue>-poison`` with its
  content intact. A message that is not valid base64 moves there at once: no
  retry can fix it, and nothing is lost.
- Polling follows the queue extension's ``RandomizedExponentialBackoffStrategy``
  (:class:`PollingDelay`): after a poll that found messages, the next comes
  after the minimum interval (100 ms); each empty poll adds a randomised
  doubling increment (100 ms x 2^n x 0.8-1.2) until ``maxPollingInterval``.
  A ``maxPollingInterval`` under 100 ms is refused at start, as Azure refuses it.
  (Azure also polls at once when the app itself wrote to the queue through an
  output binding; this app sends with the SDK, so that fast path never applies.)
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
import random
from datetime import datetime

from azure.core.exceptions import ResourceExistsError
from azure.functions.queue import QueueMessage as FunctionsQueueMessage
from azure.storage.queue import QueueMessage as StorageMessage
from azure.storage.queue.aio import QueueClient

from devhost.catalog import FunctionInfo
from devhost.config import ConfigError, QueueOptions, resolve_app_setting_references
from devhost.invoker import Invoker
from storage_protocol.client_options import client_options

log = logging.getLogger("devhost.queues")

LEASE_SECONDS = 30  # invisibility while a function runs; renewed every third of it
MIN_POLL_SECONDS = 0.1  # QueuePollingIntervals.Minimum
RANDOMIZATION = 0.2  # RandomizedExponentialBackoffStrategy.RandomizationFactor


class PollingDelay:
    """The wait before the next poll, as the queue extension computes it (see the module docstring)."""

    def __init__(self, maximum: float, rng: random.Random | None = None) -> None:
        if maximum < MIN_POLL_SECONDS:
            raise ConfigError(
                f"host.json extensions.queues.maxPollingInterval must not be less than 00:00:00.100 (got {maximum} s)"
            )
        self._maximum = maximum
        self._random = rng or random.Random()
        self._current = MIN_POLL_SECONDS
        self._exponent = 1

    def next(self, found: bool) -> float:
        if found:
            self._current, self._exponent = MIN_POLL_SECONDS, 1
        elif self._current != self._maximum:
            factor = self._random.uniform(1 - RANDOMIZATION, 1 + RANDOMIZATION)
            backoff = MIN_POLL_SECONDS + factor * 2 ** (self._exponent - 1) * MIN_POLL_SECONDS
            if backoff < self._maximum:
                self._current, self._exponent = backoff, self._exponent + 1
            else:
                self._current = self._maximum
        return self._current


def queue_client(connection_setting: str, queue_name: str) -> QueueClient:
    connection = os.environ.get(connection_setting or "AzureWebJobsStorage")
    if not connection:
        raise KeyError(f"connection setting {connection_setting} is not set")
    return QueueClient.from_connection_string(connection, queue_name, **client_options())


class QueueListener:
    def __init__(self, function: FunctionInfo, invoker: Invoker, options: QueueOptions) -> None:
        trigger = function.trigger
        self.function = function
        self.queue_name = resolve_app_setting_references(trigger["queueName"]).lower()
        self._connection_setting = trigger.get("connection") or "AzureWebJobsStorage"
        self._invoker = invoker
        self._options = options
        self._delay = PollingDelay(options.max_polling_interval)  # a value Azure refuses fails the host's start
        self._in_flight: set[asyncio.Task[None]] = set()

    async def run(self) -> None:
        async with (
            queue_client(self._connection_setting, self.queue_name) as queue,
            queue_client(self._connection_setting, f"{self.queue_name}-poison") as poison,
        ):
            await _ensure_queue(queue)
            while True:
                received = await self._receive(queue)
                for message in received:
                    self._start(queue, poison, message)
                await asyncio.sleep(self._delay.next(found=bool(received)))
                await self._wait_for_room()

    async def drain(self) -> None:
        if self._in_flight:
            await asyncio.wait(self._in_flight, timeout=10)

    async def _receive(self, queue: QueueClient) -> list[StorageMessage]:
        room = self._options.batch_size - len(self._in_flight)
        if room <= 0:
            return []
        try:
            pager = queue.receive_messages(max_messages=min(32, room), visibility_timeout=LEASE_SECONDS)
            return [message async for message in pager]
        except Exception as error:  # noqa: BLE001 - the store may be down; keep polling, say so once per poll
            log.warning("polling %s failed: %s", self.queue_name, str(error).splitlines()[0] if str(error) else error)
            return []

    async def _wait_for_room(self) -> None:
        # Fetch a new batch when half of the current one is done (newBatchThreshold).
        while len(self._in_flight) > self._options.batch_size // 2:
            await asyncio.wait(self._in_flight, return_when=asyncio.FIRST_COMPLETED)

    def _start(self, queue: QueueClient, poison: QueueClient, message: StorageMessage) -> None:
        task = asyncio.create_task(self._process(queue, poison, message))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _process(self, queue: QueueClient, poison: QueueClient, message: StorageMessage) -> None:
        body = self._decode(message.content)
        if body is None:
            log.error("%s: message %s is not valid base64; moved to poison", self.queue_name, message.id)
            await self._to_poison(queue, poison, message)
            return
        lease = _Lease(queue, message)
        renewer = asyncio.create_task(lease.keep_invisible())
        try:
            await self._invoker.invoke(
                self.function,
                self._binding_value(message, body),
                attributes={
                    "messaging.system": "azure_queue",
                    "messaging.destination.name": self.queue_name,
                    "messaging.message.id": message.id or "",
                    "messaging.operation.type": "process",
                },
            )
        except Exception:
            log.exception(
                "%s failed on message %s (dequeue count %s)", self.function.name, message.id, message.dequeue_count
            )
            await _stop(renewer)
            await self._after_failure(queue, poison, message, lease)
            return
        await _stop(renewer)
        await queue.delete_message(message.id, lease.pop_receipt)

    async def _after_failure(
        self, queue: QueueClient, poison: QueueClient, message: StorageMessage, lease: _Lease
    ) -> None:
        message.pop_receipt = lease.pop_receipt
        if (message.dequeue_count or 0) >= self._options.max_dequeue_count:
            log.error(
                "%s: message %s failed %s times; moved to %s-poison",
                self.function.name,
                message.id,
                message.dequeue_count,
                self.queue_name,
            )
            await self._to_poison(queue, poison, message)
            return
        await queue.update_message(
            message.id, lease.pop_receipt, visibility_timeout=int(self._options.visibility_timeout)
        )

    async def _to_poison(self, queue: QueueClient, poison: QueueClient, message: StorageMessage) -> None:
        await _ensure_queue(poison)
        await poison.send_message(message.content)
        await queue.delete_message(message.id, message.pop_receipt)

    def _decode(self, content: str) -> bytes | None:
        if self._options.message_encoding == "none":
            return content.encode("utf-8")
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            return None

    def _binding_value(self, message: StorageMessage, body: bytes) -> FunctionsQueueMessage:
        return _functions_message(
            id=message.id,
            body=body,
            dequeue_count=message.dequeue_count,
            expiration_time=message.expires_on,
            insertion_time=message.inserted_on,
            time_next_visible=message.next_visible_on,
            pop_receipt=message.pop_receipt,
        )


class _Lease:
    """Keeps a message invisible while its function runs; tracks the latest pop receipt."""

    def __init__(self, queue: QueueClient, message: StorageMessage) -> None:
        self._queue = queue
        self._id = message.id
        self.pop_receipt = message.pop_receipt

    async def keep_invisible(self) -> None:
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            receipt = await self._queue.update_message(self._id, self.pop_receipt, visibility_timeout=LEASE_SECONDS)
            self.pop_receipt = receipt.pop_receipt


async def _ensure_queue(queue: QueueClient) -> None:
    try:
        await queue.create_queue()
    except ResourceExistsError:
        pass


def admin_message(text: str) -> FunctionsQueueMessage:
    """The message an admin run of a queue function receives, as in the Functions host."""
    return _functions_message(id="admin", body=text.encode("utf-8"), dequeue_count=1)


def _functions_message(
    *,
    id: str,
    body: bytes,
    dequeue_count: int | None,
    expiration_time: datetime | None = None,
    insertion_time: datetime | None = None,
    time_next_visible: datetime | None = None,
    pop_receipt: str | None = None,
) -> FunctionsQueueMessage:
    """The queue binding's message, as the worker hands it to a function."""
    # azure.functions ships types, but QueueMessage's constructor has no annotations: the one untyped call.
    return FunctionsQueueMessage(  # type: ignore[no-untyped-call]
        id=id,
        body=body,
        dequeue_count=dequeue_count,
        expiration_time=expiration_time,
        insertion_time=insertion_time,
        time_next_visible=time_next_visible,
        pop_receipt=pop_receipt,
    )


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
