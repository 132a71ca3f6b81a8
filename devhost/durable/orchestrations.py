"""Runs orchestration episodes from the control queues.

Each received message is held (kept invisible) and handed to its instance's
session; a session handles its instance's messages one batch at a time, so an
instance never runs two episodes at once, and at most
``maxConcurrentOrchestratorFunctions`` episodes run together. Messages the
host sends itself arrive by local delivery (``queues``) rather than a poll.

A batch is sorted out against the instance (``triage``), played and
committed (``checkpoint``, which says in what order, so that a crash at any
point is survived), and only then are its messages deleted: in the
background, so that the instance's next batch does not wait for the deletes
(a message whose delete is lost comes back and is recognised as applied).

Between episodes the instance's row and history stay in memory
(``instance_cache``): a batch is first played on the remembered copy,
without reading the store, and the commit's write, conditional on the
remembered ETag, is what confirms the copy. A batch that would be settled
without a commit is confirmed by reading the row. Whenever the store does not
confirm the copy, the batch is handled again from a fresh read.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from azure.storage.queue import QueueMessage
from azure.storage.queue.aio import QueueClient

from devhost.durable import history as h
from devhost.durable.checkpoint import Episodes, parent_of
from devhost.durable.functions import DurableFunctions
from devhost.durable.history import Record
from devhost.durable.instance_cache import InstanceCache
from devhost.durable.instances import InstanceState
from devhost.durable.outbox import Outbox
from devhost.durable.polling import QueuePoller
from devhost.durable.queues import ControlMessage, EngineMessage, HeldMessage, TaskHubQueues
from devhost.durable.settings import DurableSettings
from devhost.durable.store import InstanceConflict, InstanceStore
from devhost.durable.triage import Triage, spent, task_of, triage

log = logging.getLogger("devhost.durable")

MAX_HELD = 2000  # messages held in memory before the pollers pause
POSTPONE_SECONDS = 1.0
MAX_POSTPONE_SECONDS = 30.0


@dataclass
class _Session:
    inbox: list[HeldMessage] = field(default_factory=list)


class OrchestrationDispatcher:
    def __init__(
        self,
        settings: DurableSettings,
        store: InstanceStore,
        queues: TaskHubQueues,
        functions: DurableFunctions,
        cache: InstanceCache | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._queues = queues
        self._functions = functions
        self._outbox = Outbox(queues)
        self._slots = asyncio.Semaphore(settings.max_concurrent_orchestrators)
        self._executor = ThreadPoolExecutor(
            max_workers=settings.max_concurrent_orchestrators, thread_name_prefix="orchestrator"
        )
        self._sessions: dict[str, _Session] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._held = 0
        self._room_changed = asyncio.Event()
        self._cache = cache if cache is not None else InstanceCache()
        self._episodes = Episodes(settings, store, self._outbox, functions, self._executor, self._cache)
        self.visibility = settings.control_visibility
        # how long a result for a task its execution has not recorded may wait for that record: the
        # episode that scheduled it is replayed once its message comes back after a crash
        self._early_patience = 2 * settings.control_visibility + 30

    async def run(self) -> None:
        self._queues.local_control = self
        try:
            async with asyncio.TaskGroup() as group:
                for partition, queue in enumerate(self._queues.control):
                    poller = QueuePoller(
                        queue,
                        self._queues.control_wake[partition],
                        self._settings.control_visibility,
                        self._settings.max_polling_interval,
                        self._room,
                        self._wait_for_room,
                    )
                    group.create_task(poller.run(functools.partial(self._received, queue)))
        finally:
            self._queues.local_control = None

    def shutdown(self) -> None:
        """Stop where things are: whatever was not committed is done again by the next host."""
        self._queues.local_control = None
        for task in list(self._tasks):
            task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _room(self) -> int:
        return max(0, min(self._settings.control_queue_batch_size, MAX_HELD - self._held))

    async def _wait_for_room(self) -> None:
        while self._room() == 0:
            self._room_changed.clear()
            await self._room_changed.wait()

    def reserve(self) -> bool:
        if MAX_HELD - self._held <= 0:
            return False
        self._held += 1
        return True

    def cancel(self) -> None:
        self._held -= 1
        self._room_changed.set()

    def deliver(self, queue: QueueClient, message: QueueMessage, body: EngineMessage) -> None:
        """A message this host sent itself (see ``queues``), its room reserved."""
        self._hold(HeldMessage(queue, message, self.visibility, body))

    async def _received(self, queue: QueueClient, message: QueueMessage) -> None:
        try:
            body = await self._queues.decode(message)
        except ValueError as error:
            await self._queues.to_poison(queue, message, str(error))
            return
        self._held += 1
        self._hold(HeldMessage(queue, message, self.visibility, body))

    def _hold(self, held: HeldMessage) -> None:
        instance_id = held.body["instance"]
        session = self._sessions.get(instance_id)
        if session is not None:
            session.inbox.append(held)
            return
        session = self._sessions[instance_id] = _Session([held])
        task = asyncio.create_task(self._run_session(instance_id, session), name=f"instance {instance_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_session(self, instance_id: str, session: _Session) -> None:
        batch: list[HeldMessage] = []
        try:
            while session.inbox:
                batch, session.inbox = session.inbox, []
                async with self._slots:
                    await self._work(instance_id, batch)
                self._held -= len(batch)
                batch = []
                self._room_changed.set()
        except asyncio.CancelledError:  # shutdown: what this session held shows again for the next host
            for held in [*batch, *session.inbox]:
                held.abandon()
            raise
        finally:
            del self._sessions[instance_id]

    async def _work(self, instance_id: str, held: list[HeldMessage]) -> None:
        try:
            later = await self._process(instance_id, held)
        except InstanceConflict:
            log.info("instance %s changed while an episode ran; its messages will be handled again", instance_id)
            self._cache.forget(instance_id)
            await asyncio.gather(*(m.release(POSTPONE_SECONDS) for m in held))
            return
        except Exception:
            log.exception("an episode of instance %s failed; its messages will be handled again", instance_id)
            self._cache.forget(instance_id)
            await asyncio.gather(*(m.release(2 * POSTPONE_SECONDS) for m in held))
            return
        await asyncio.gather(*(m.release(later[m]) for m in held if m in later))
        # The episode is committed: deleting what caused it need not hold up the instance's next batch
        # (a message whose delete is lost comes back and is recognised as applied).
        done = [m for m in held if m not in later]
        if done:
            self._background(asyncio.gather(*(m.delete() for m in done)))

    def _background(self, work: Awaitable[object]) -> None:
        async def run() -> None:
            await work

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _process(self, instance_id: str, held: list[HeldMessage]) -> dict[HeldMessage, float]:
        """Apply ``held`` messages to the instance.

        Returns the messages to handle later, each with the delay before it is seen again; the
        others are done with. The remembered copy of the instance is tried first; when the store
        does not confirm it (see ``instance_cache``), the batch is handled again from a fresh read.
        """
        held = sorted(held, key=lambda m: m.message.inserted_on.timestamp() if m.message.inserted_on else 0.0)
        messages = [ControlMessage.from_json(m.body) for m in held]
        rearmed = await self._rearm_early_timers(messages)
        ready = [i for i in range(len(messages)) if i not in rearmed]
        remembered = self._cache.get(instance_id)
        if remembered is not None:
            try:
                later = await self._apply(held, messages, ready, *remembered, confirmed=False)
            except InstanceConflict:
                later = None
            if later is not None:
                return later
            self._cache.forget(instance_id)
        state = await self._store.get(instance_id)
        later = await self._apply(held, messages, ready, state, await self._history(state), confirmed=True)
        assert later is not None
        return later

    async def _apply(
        self,
        held: list[HeldMessage],
        messages: list[ControlMessage],
        ready: list[int],
        state: InstanceState | None,
        records: list[Record],
        confirmed: bool,
    ) -> dict[HeldMessage, float] | None:
        """Triage and play the batch on ``state``; ``None`` if ``state`` (not ``confirmed`` as the
        store's) turns out not to be the store's before anything was committed or settled."""
        sorted_out = triage(state, records, [messages[i] for i in ready])
        later = self._later([held[i] for i in ready], [messages[i] for i in ready], sorted_out)
        previous = state
        if sorted_out.start is not None:
            state, records = self._episodes.begin(state, sorted_out.start), []
        if state is None:
            return later
        consumed = tuple(c.message_id for m, c in zip(held, messages, strict=True) if m not in later)
        committed = await self._episodes.advance(state, records, sorted_out, consumed)
        if not committed and not confirmed and not await self._still_current(previous):
            return None
        await self._refuse(sorted_out.refused_starts)
        if sorted_out.start is not None and previous is not None:
            # the execution it replaced (or the rows of one long gone) go once the new one is committed
            await self._store.delete_other_executions(state.instance_id, str(sorted_out.start.execution_id))
        return later

    async def _still_current(self, remembered: InstanceState | None) -> bool:
        """Whether the instance row is still the one remembered (nothing committed to vouch for it)."""
        if remembered is None:
            return False
        current = await self._store.get(remembered.instance_id)
        return current is not None and current.etag == remembered.etag

    def _later(
        self, held: list[HeldMessage], messages: list[ControlMessage], sorted_out: Triage
    ) -> dict[HeldMessage, float]:
        """The messages triage held back, and when to look at each again."""
        later = {held[i]: POSTPONE_SECONDS for i in sorted_out.postponed}
        for i in sorted_out.early:
            inserted = held[i].message.inserted_on
            age = (h.now() - inserted).total_seconds() if inserted else 0.0
            if age > self._early_patience:
                spent(messages[i], f"task {task_of(messages[i])} was never scheduled by its execution")
                continue
            # the episode that scheduled it has not committed: after a crash, not before the message
            # that caused that episode comes back (the control queue's visibility timeout)
            later[held[i]] = min(MAX_POSTPONE_SECONDS, POSTPONE_SECONDS * 2 ** min(held[i].dequeue_count, 5))
        return later

    async def _history(self, state: InstanceState | None) -> list[Record]:
        if state is None or state.history_length == 0:
            return []
        cached = self._cache.history(state)
        if cached is not None:
            return cached
        records = await self._store.load_history(state.instance_id, state.execution_id, state.history_length)
        self._cache.remember(state, records)
        return records

    async def _rearm_early_timers(self, messages: list[ControlMessage]) -> set[int]:
        """A timer never fires early: one due within a second is waited for, a later one is sent again.

        (Queue visibility counts whole seconds and lasts at most seven days.)
        """
        early: set[int] = set()
        for index, message in enumerate(messages):
            if message.event["EventType"] != h.TIMER_FIRED:
                continue
            remaining = (h.parse_timestamp(message.event["FireAt"]) - h.now()).total_seconds()
            if remaining > 1.0:
                await self._queues.send_control(message, delay=remaining)
                early.add(index)
            elif remaining > 0:
                await asyncio.sleep(remaining)
        return early

    async def _refuse(self, starts: list[ControlMessage]) -> None:
        for start in starts:
            parent = parent_of(start.event)
            log.warning(
                "instance %s is already running; start of execution %s refused", start.instance_id, start.execution_id
            )
            if parent is not None:
                await self._outbox.refuse_child(parent, start.instance_id)
