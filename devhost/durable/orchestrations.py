"""Runs orchestration episodes from the control queues.

Each received message is held (kept invisible) and handed to its instance's
session; a session handles its instance's messages one batch at a time, so an
instance never runs two episodes at once, and at most
``maxConcurrentOrchestratorFunctions`` episodes run together.

An episode is committed in an order that survives a crash at any point:

1. new history rows are written (beyond the instance's committed length);
2. the instance row is replaced, if unchanged since read (its ETag): this is
   the commit;
3. the messages the new history implies are sent (work items, timers,
   sub-orchestration starts, the parent's notice);
4. the messages that caused the episode are deleted.

A crash before 2 leaves the episode undone (its messages come back); between
2 and 4, the messages come back, are recognised as applied, and the sends of
3 are repeated (activities run at least once; timers and results are
deduplicated by task id).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from azure.storage.queue import QueueMessage
from azure.storage.queue.aio import QueueClient

from devhost.durable import history as h
from devhost.durable.episode import Execution, Outcome, Runner, play, terminate
from devhost.durable.functions import DurableFunctions
from devhost.durable.history import EventType, Record
from devhost.durable.instances import InstanceState, ParentRef, RuntimeStatus
from devhost.durable.outbox import Outbox
from devhost.durable.polling import QueuePoller
from devhost.durable.queues import ControlMessage, HeldMessage, TaskHubQueues
from devhost.durable.settings import DurableSettings
from devhost.durable.store import InstanceConflict, InstanceStore
from devhost.durable.triage import Triage, triage

log = logging.getLogger("devhost.durable")

CACHE_SIZE = 500
DISPATCH_MEMORY = 20_000
MAX_HELD = 2000  # messages held in memory before the pollers pause
POSTPONE_SECONDS = 1.0


@dataclass
class _Session:
    inbox: list[HeldMessage] = field(default_factory=list)


class OrchestrationDispatcher:
    def __init__(self, settings: DurableSettings, store: InstanceStore, queues: TaskHubQueues,
                 functions: DurableFunctions) -> None:
        self._settings = settings
        self._store = store
        self._queues = queues
        self._functions = functions
        self._outbox = Outbox(queues)
        self._slots = asyncio.Semaphore(settings.max_concurrent_orchestrators)
        self._executor = ThreadPoolExecutor(max_workers=settings.max_concurrent_orchestrators,
                                            thread_name_prefix="orchestrator")
        self._sessions: dict[str, _Session] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._held = 0
        self._room_changed = asyncio.Event()
        self._cache: OrderedDict[str, tuple[str, list[Record]]] = OrderedDict()
        # instance -> (execution, history length) whose implied messages this process has sent
        self._dispatched: OrderedDict[str, tuple[str, int]] = OrderedDict()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for partition, queue in enumerate(self._queues.control):
                poller = QueuePoller(queue, self._queues.control_wake[partition], self._settings.control_visibility,
                                     self._settings.max_polling_interval, self._room, self._wait_for_room)
                group.create_task(poller.run(lambda message, q=queue: self._received(q, message)))

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
            spent = await self._process(instance_id, held)
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
        await asyncio.gather(*(m.delete() if m in spent else m.release(POSTPONE_SECONDS) for m in held))

    async def _process(self, instance_id: str, held: list[HeldMessage]) -> list[HeldMessage]:
        """Apply ``held`` messages to the instance; returns those that are done with."""
        held = sorted(held, key=lambda m: m.message.inserted_on.timestamp() if m.message.inserted_on else 0.0)
        messages = [ControlMessage.from_json(m.body) for m in held]
        early = await self._rearm_early_timers(messages)
        state = await self._store.get(instance_id)
        records = await self._history(state)
        if state is not None:
            await self._resend_undispatched(state, records)
        ready = [m for i, m in enumerate(messages) if i not in early]
        sorted_out = triage(state, records, ready)
        await self._refuse(sorted_out.refused_starts)
        postponed = {id(ready[i]) for i in sorted_out.postponed}
        spent = [m for m, c in zip(held, messages) if id(c) not in postponed]
        replaced = False
        if sorted_out.start is not None:
            replaced = state is not None and state.history_length > 0
            state, records = self._begin(state, sorted_out.start), []
        if state is None:
            return spent
        await self._advance(state, records, sorted_out)
        if replaced:  # the previous execution's rows go once the new one is committed
            await self._store.delete_other_executions(state.instance_id, sorted_out.start.execution_id or "")
        return spent

    async def _advance(self, state: InstanceState, records: list[Record], sorted_out: Triage) -> None:
        """Run episodes until the instance waits (one, or more after a continue-as-new)."""
        if state.status.finished:
            # Triage spent whatever arrived for a finished execution (say, a work item's result sent
            # again after a restart, landing after completion). There is nothing to play: ``play`` would
            # find nothing to replay and answer "Running", and committing that would reopen the instance.
            return
        incoming = ([Record(sorted_out.start.event, message_id=sorted_out.start.message_id)]
                    if sorted_out.start else []) + sorted_out.incoming
        terminate_reason, suspended = sorted_out.terminate_reason, sorted_out.suspended
        while True:
            at = h.now()
            execution = Execution(state.instance_id, state.execution_id, state.name)
            if terminate_reason is not None:
                outcome = terminate(records, incoming, terminate_reason, at)
            else:
                outcome = await play(execution, records, incoming, suspended, self._runner(state), at)
            if len(outcome.records) == len(records) and outcome.status == state.status.value:
                return
            if outcome.status == RuntimeStatus.CONTINUED_AS_NEW.value:
                state, records = await self._continue_as_new(state, outcome)
                incoming, terminate_reason, suspended = [], None, False
                await asyncio.sleep(0)
                continue
            state, records = await self._commit(state, len(records), outcome)
            await self._dispatch(state, records)
            self._log_outcome(state)
            return

    def _begin(self, state: InstanceState | None, start: ControlMessage) -> InstanceState:
        event = start.event
        keep_created = state is not None and state.execution_id == start.execution_id
        fresh = InstanceState(
            instance_id=start.instance_id, name=str(event["Name"]), execution_id=str(start.execution_id),
            status=RuntimeStatus.PENDING, input=event.get("Input"),
            parent=_parent(event), etag=state.etag if state else None,
        )
        if keep_created and state is not None:
            fresh.created = state.created
        self._cache.pop(start.instance_id, None)
        return fresh

    def _runner(self, state: InstanceState) -> Runner:
        return self._functions.runner(state.instance_id, state.name, self._executor,
                                      self._settings.function_timeout)

    async def _commit(self, state: InstanceState, committed: int, outcome: Outcome) -> tuple[InstanceState, list[Record]]:
        await self._store.write_history(state.instance_id, state.execution_id, committed, outcome.records[committed:])
        status = RuntimeStatus(outcome.status)
        updated = state.copy(
            status=status, output=outcome.output if status.finished else state.output,
            custom_status=outcome.custom_status if outcome.ran else state.custom_status,
            failure=outcome.failure, updated=h.now(), history_length=len(outcome.records),
            dispatched_length=self._dispatched_from(state),
        )
        updated.etag = await self._store.replace(updated)
        self._remember(updated, outcome.records)
        return updated, outcome.records

    async def _continue_as_new(self, state: InstanceState, outcome: Outcome) -> tuple[InstanceState, list[Record]]:
        """Start the next execution with the new input; the old execution's history goes once it is committed.

        The episode that asked for it needs no commit of its own: had the host died before this, the
        episode would simply run again.
        """
        at = h.now()
        execution_id = uuid.uuid4().hex
        parent = state.parent.to_event() if state.parent else None
        records = [Record(h.orchestrator_started(at)),
                   Record(h.execution_started(at, state.instance_id, execution_id, state.name,
                                              outcome.continue_input, parent))]
        await self._store.write_history(state.instance_id, execution_id, 0, records)
        fresh = state.copy(execution_id=execution_id, status=RuntimeStatus.RUNNING, input=outcome.continue_input,
                           output=None, failure=None, custom_status=outcome.custom_status, updated=at,
                           history_length=len(records), dispatched_length=0)
        fresh.etag = await self._store.replace(fresh)
        await self._store.delete_other_executions(state.instance_id, execution_id)
        self._dispatched.pop(state.instance_id, None)
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

    def _dispatched_from(self, state: InstanceState) -> int:
        known = self._dispatched.get(state.instance_id)
        if known is not None and known[0] == state.execution_id:
            return max(known[1], state.dispatched_length)
        return state.dispatched_length

    async def _dispatch(self, state: InstanceState, records: list[Record]) -> None:
        await self._outbox.send(state, records, self._dispatched_from(state))
        self._dispatched[state.instance_id] = (state.execution_id, len(records))
        self._dispatched.move_to_end(state.instance_id)
        while len(self._dispatched) > DISPATCH_MEMORY:
            self._dispatched.popitem(last=False)  # forgetting only means sending again: harmless

    async def _resend_undispatched(self, state: InstanceState, records: list[Record]) -> None:
        """After a restart: what the last committed episode implied may not have been sent."""
        if self._dispatched_from(state) < len(records):
            log.info("instance %s: sending again what its last episode implied", state.instance_id)
            await self._dispatch(state, records)

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
            log.warning("instance %s is already running; start of execution %s refused",
                        start.instance_id, start.execution_id)
            if parent is not None:
                await self._outbox.refuse_child(parent, start.instance_id)

    @staticmethod
    def _log_outcome(state: InstanceState) -> None:
        if state.status.finished:
            level = logging.WARNING if state.status == RuntimeStatus.FAILED else logging.INFO
            log.log(level, "orchestration %s (%s) %s%s", state.name, state.instance_id, state.status.value.lower(),
                    f": {state.output}" if state.status == RuntimeStatus.FAILED else "")


def _parent(event: dict[str, Any]) -> ParentRef | None:
    return ParentRef.from_event(event.get("ParentInstance"))
