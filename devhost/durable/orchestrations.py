"""Runs orchestration episodes from the control queues.

Each received message is held (kept invisible) and handed to its instance's
session; a session handles its instance's messages one batch at a time, so an
instance never runs two episodes at once, and at most
``maxConcurrentOrchestratorFunctions`` episodes run together.

An episode is committed in the Azure Storage provider's order, which survives
a crash at any point:

1. the messages the new history implies are sent (work items, timers,
   sub-orchestration starts, the parent's notice), and the new history rows
   are written (beyond the instance's committed length, so not yet counted);
2. the instance row is replaced, if unchanged since read (its ETag): this is
   the commit;
3. the messages that caused the episode are deleted.

A crash before 2 leaves the episode undone: its messages come back after the
control queue's visibility timeout and the episode is replayed, sending the
same tasks again (activities run at least once; results and timers are
deduplicated by task id). A crash after 2 sends nothing again: the causing
messages come back, are recognised as applied, and are deleted; whatever the
dead host was holding (work items it was running) comes back after its
visibility timeout. As the sends come first, a result can reach an instance
before the episode that scheduled its task has committed (only after a
crash); it waits for that commit.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from azure.storage.queue import QueueMessage
from azure.storage.queue.aio import QueueClient

from devhost.durable import history as h
from devhost.durable.episode import Execution, Outcome, Runner, play, start_trace, terminate
from devhost.durable.functions import DurableFunctions
from devhost.durable.history import EventType, Record
from devhost.durable.instances import InstanceState, ParentRef, RuntimeStatus
from devhost.durable.outbox import Outbox
from devhost.durable.polling import QueuePoller
from devhost.durable.queues import ControlMessage, HeldMessage, TaskHubQueues
from devhost.durable.settings import DurableSettings
from devhost.durable.store import InstanceConflict, InstanceStore
from devhost.durable.triage import Triage, spent, task_of, triage
from devhost.tracing import host_span

log = logging.getLogger("devhost.durable")

CACHE_SIZE = 500
MAX_HELD = 2000  # messages held in memory before the pollers pause
POSTPONE_SECONDS = 1.0
MAX_POSTPONE_SECONDS = 30.0


@dataclass
class _Session:
    inbox: list[HeldMessage] = field(default_factory=list)


class OrchestrationDispatcher:
    def __init__(
        self, settings: DurableSettings, store: InstanceStore, queues: TaskHubQueues, functions: DurableFunctions
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
        self._cache: OrderedDict[str, tuple[str, list[Record]]] = OrderedDict()
        # how long a result for a task its execution has not recorded may wait for that record: the
        # episode that scheduled it is replayed once its message comes back after a crash
        self._early_patience = 2 * settings.control_visibility + 30

    async def run(self) -> None:
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

    def shutdown(self) -> None:
        """Stop where things are: whatever was not committed is done again by the next host."""
        for task in self._tasks:
            task.cancel()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _room(self) -> int:
        return max(0, min(self._settings.control_queue_batch_size, MAX_HELD - self._held))

    async def _wait_for_room(self) -> None:
        while self._room() == 0:
            self._room_changed.clear()
            await self._room_changed.wait()

    async def _received(self, queue: QueueClient, message: QueueMessage) -> None:
        try:
            body = await self._queues.decode(message)
        except ValueError as error:
            await self._queues.to_poison(queue, message, str(error))
            return
        held = HeldMessage(queue, message, self._settings.control_visibility, body)
        self._held += 1
        instance_id = str(body["instance"])
        session = self._sessions.get(instance_id)
        if session is not None:
            session.inbox.append(held)
            return
        session = self._sessions[instance_id] = _Session([held])
        task = asyncio.create_task(self._run_session(instance_id, session), name=f"instance {instance_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_session(self, instance_id: str, session: _Session) -> None:
        try:
            while session.inbox:
                batch, session.inbox = session.inbox, []
                async with self._slots:
                    await self._work(instance_id, batch)
                self._held -= len(batch)
                self._room_changed.set()
        finally:
            del self._sessions[instance_id]

    async def _work(self, instance_id: str, held: list[HeldMessage]) -> None:
        try:
            later = await self._process(instance_id, held)
        except InstanceConflict:
            log.info("instance %s changed while an episode ran; its messages will be handled again", instance_id)
            self._cache.pop(instance_id, None)
            await asyncio.gather(*(m.release(POSTPONE_SECONDS) for m in held))
            return
        except Exception:
            log.exception("an episode of instance %s failed; its messages will be handled again", instance_id)
            self._cache.pop(instance_id, None)
            await asyncio.gather(*(m.release(2 * POSTPONE_SECONDS) for m in held))
            return
        await asyncio.gather(*(m.release(later[m]) if m in later else m.delete() for m in held))

    async def _process(self, instance_id: str, held: list[HeldMessage]) -> dict[HeldMessage, float]:
        """Apply ``held`` messages to the instance.

        Returns the messages to handle later, each with the delay before it is seen again; the
        others are done with.
        """
        held = sorted(held, key=lambda m: m.message.inserted_on.timestamp() if m.message.inserted_on else 0.0)
        messages = [ControlMessage.from_json(m.body) for m in held]
        rearmed = await self._rearm_early_timers(messages)
        state = await self._store.get(instance_id)
        records = await self._history(state)
        ready = [i for i in range(len(messages)) if i not in rearmed]
        sorted_out = triage(state, records, [messages[i] for i in ready])
        await self._refuse(sorted_out.refused_starts)
        later = self._later([held[i] for i in ready], [messages[i] for i in ready], sorted_out)
        previous = state
        if sorted_out.start is not None:
            state, records = self._begin(state, sorted_out.start), []
        if state is None:
            return later
        consumed = tuple(c.message_id for m, c in zip(held, messages, strict=True) if m not in later)
        await self._advance(state, records, sorted_out, consumed)
        if sorted_out.start is not None and previous is not None:
            # the execution it replaced (or the rows of one long gone) go once the new one is committed
            await self._store.delete_other_executions(instance_id, str(sorted_out.start.execution_id))
        return later

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

    async def _advance(
        self, state: InstanceState, records: list[Record], sorted_out: Triage, consumed: tuple[str, ...]
    ) -> None:
        """Run episodes until the instance waits (one, or more after a continue-as-new)."""
        if state.status.finished:
            # Triage spent whatever arrived for a finished execution (say, a work item's result sent
            # again after a restart, landing after completion). There is nothing to play: ``play`` would
            # find nothing to replay and answer "Running", and committing that would reopen the instance.
            return
        incoming = (
            [Record(sorted_out.start.event, message_id=sorted_out.start.message_id)] if sorted_out.start else []
        ) + sorted_out.incoming
        terminate_reason, suspended = sorted_out.terminate_reason, sorted_out.suspended
        while True:
            at = h.now()
            execution = Execution(state.instance_id, state.execution_id, state.name)
            # The episode's span, under the context the instance was started in: the orchestrator's code
            # makes none (it replays), the engine does, and the work items it sends carry this one.
            started_in = start_trace(records + incoming)
            with host_span(
                f"orchestration:{state.name}",
                trigger="other",
                parent=started_in,
                attributes={"faas.name": state.name, "durable.instance_id": state.instance_id},
            ):
                if terminate_reason is not None:
                    outcome = terminate(records, incoming, terminate_reason, at)
                else:
                    outcome = await play(execution, records, incoming, suspended, self._runner(state), at)
                if len(outcome.records) == len(records) and outcome.status == state.status.value:
                    return
                if outcome.status == RuntimeStatus.CONTINUED_AS_NEW.value:
                    # What this episode received and the old execution did not use is dropped with it (the
                    # Python SDK cannot carry events over); the new execution starts with its input only,
                    # in the trace the first one began in.
                    state, records = await self._continue_as_new(state, outcome, consumed, started_in)
                    incoming, terminate_reason, suspended = [], None, False
                    await asyncio.sleep(0)
                    continue
                state, records = await self._commit(state, len(records), outcome)
                self._log_outcome(state)
                return

    def _begin(self, state: InstanceState | None, start: ControlMessage) -> InstanceState:
        event = start.event
        keep_created = state is not None and state.execution_id == start.execution_id
        fresh = InstanceState(
            instance_id=start.instance_id,
            name=str(event["Name"]),
            execution_id=str(start.execution_id),
            status=RuntimeStatus.PENDING,
            input=event.get("Input"),
            parent=_parent(event),
            etag=state.etag if state else None,
        )
        if keep_created and state is not None:
            fresh.created = state.created
        if state is not None and not keep_created:
            log.info(
                "instance %s: execution %s replaces execution %s (%s)",
                start.instance_id,
                start.execution_id,
                state.execution_id,
                state.status.value,
            )
        self._cache.pop(start.instance_id, None)
        return fresh

    def _runner(self, state: InstanceState) -> Runner:
        return self._functions.runner(state.instance_id, state.name, self._executor, self._settings.function_timeout)

    async def _commit(
        self, state: InstanceState, committed: int, outcome: Outcome
    ) -> tuple[InstanceState, list[Record]]:
        status = RuntimeStatus(outcome.status)
        updated = state.copy(
            status=status,
            output=outcome.output if status.finished else state.output,
            custom_status=outcome.custom_status if outcome.ran else state.custom_status,
            failure=outcome.failure,
            updated=h.now(),
            history_length=len(outcome.records),
        )
        # Messages first, then the checkpoint, as the Azure Storage provider does: once the row says
        # the episode happened, everything it implied is on a queue, so nothing is ever sent twice
        # because of where a crash fell after the commit. A crash before the commit replays the
        # episode, which sends the same tasks (same ids) again: at least once.
        await asyncio.gather(
            self._outbox.send(updated, outcome.records, committed),
            self._store.write_history(state.instance_id, state.execution_id, committed, outcome.records[committed:]),
        )
        try:
            updated.etag = await self._store.replace(updated)
        except InstanceConflict:
            updated.etag = await self._commit_over_pending_mark(updated)
        self._remember(updated, outcome.records)
        return updated, outcome.records

    async def _commit_over_pending_mark(self, updated: InstanceState) -> str:
        """The management API writes its Pending row just after it sends the start, so the first episode
        can find that row changed under it. The row then names this very execution and no history:
        nothing the episode relied on changed, and it commits over it (instead of being replayed,
        which would send its tasks twice). Any other change is a real conflict."""
        current = await self._store.get(updated.instance_id)
        if current is None or current.execution_id != updated.execution_id or current.history_length != 0:
            raise InstanceConflict(updated.instance_id)
        updated.created, updated.etag = current.created, current.etag
        return await self._store.replace(updated)

    async def _continue_as_new(
        self,
        state: InstanceState,
        outcome: Outcome,
        consumed: tuple[str, ...],
        trace_context: dict[str, str] | None = None,
    ) -> tuple[InstanceState, list[Record]]:
        """Start the next execution with the new input; the old execution's history goes once it is committed.

        The episode that asked for it needs no commit of its own: had the host died before this, the
        episode would simply run again. ``consumed`` (the messages of the batch) is recorded on the new
        execution, so that one of them delivered again is not applied to it.
        """
        at = h.now()
        execution_id = uuid.uuid4().hex
        parent = state.parent.to_event() if state.parent else None
        records = [
            Record(h.orchestrator_started(at)),
            Record(
                h.execution_started(
                    at,
                    state.instance_id,
                    execution_id,
                    state.name,
                    outcome.continue_input,
                    parent,
                    trace_context=trace_context,
                ),
                consumed=consumed,
            ),
        ]
        await self._store.write_history(state.instance_id, execution_id, 0, records)
        fresh = state.copy(
            execution_id=execution_id,
            status=RuntimeStatus.RUNNING,
            input=outcome.continue_input,
            output=None,
            failure=None,
            custom_status=outcome.custom_status,
            updated=at,
            history_length=len(records),
        )
        fresh.etag = await self._store.replace(fresh)
        await self._store.delete_other_executions(state.instance_id, execution_id)
        self._remember(fresh, records)
        return fresh, records

    async def _history(self, state: InstanceState | None) -> list[Record]:
        if state is None or state.history_length == 0:
            return []
        cached = self._cache.get(state.instance_id)
        if cached is not None and cached[0] == state.etag:
            self._cache.move_to_end(state.instance_id)
            return list(cached[1])
        records = await self._store.load_history(state.instance_id, state.execution_id, state.history_length)
        self._remember(state, records)
        return records

    def _remember(self, state: InstanceState, records: list[Record]) -> None:
        if state.etag is None:
            return
        self._cache[state.instance_id] = (state.etag, list(records))
        self._cache.move_to_end(state.instance_id)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

    async def _rearm_early_timers(self, messages: list[ControlMessage]) -> set[int]:
        """A timer never fires early: one due within a second is waited for, a later one is sent again.

        (Queue visibility counts whole seconds and lasts at most seven days.)
        """
        early: set[int] = set()
        for index, message in enumerate(messages):
            if int(message.event["EventType"]) != EventType.TIMER_FIRED:
                continue
            remaining = (h.parse_timestamp(str(message.event["FireAt"])) - h.now()).total_seconds()
            if remaining > 1.0:
                await self._queues.send_control(message, delay=remaining)
                early.add(index)
            elif remaining > 0:
                await asyncio.sleep(remaining)
        return early

    async def _refuse(self, starts: list[ControlMessage]) -> None:
        for start in starts:
            parent = _parent(start.event)
            log.warning(
                "instance %s is already running; start of execution %s refused", start.instance_id, start.execution_id
            )
            if parent is not None:
                await self._outbox.refuse_child(parent, start.instance_id)

    @staticmethod
    def _log_outcome(state: InstanceState) -> None:
        if state.status.finished:
            level = logging.WARNING if state.status == RuntimeStatus.FAILED else logging.INFO
            log.log(
                level,
                "orchestration %s (%s) %s%s",
                state.name,
                state.instance_id,
                state.status.value.lower(),
                f": {state.output}" if state.status == RuntimeStatus.FAILED else "",
            )


def _parent(event: dict[str, Any]) -> ParentRef | None:
    return ParentRef.from_event(event.get("ParentInstance"))
