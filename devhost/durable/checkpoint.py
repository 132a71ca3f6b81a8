"""Plays an instance's episodes and commits each one, in the Azure Storage provider's order.

The order survives a crash at any point:

1. the messages the new history implies are sent (work items, timers,
   sub-orchestration starts, the parent's notice), and the new history rows
   are written (beyond the instance's committed length, so not yet counted);
2. the instance row is replaced, if unchanged since read (its ETag): this is
   the commit;
3. the messages that caused the episode are deleted (by the dispatcher,
   ``orchestrations``).

A crash before 2 leaves the episode undone: its messages come back after the
control queue's visibility timeout and the episode is replayed, sending the
same tasks again (activities run at least once; results and timers are
deduplicated by task id). A crash after 2 sends nothing again: the causing
messages come back, are recognised as applied, and are deleted; whatever the
dead host was holding (work items it was running) comes back after its
visibility timeout. As the sends come first, a result can reach an instance
before the episode that scheduled its task has committed (only after a
crash); it waits for that commit.

Every commit is remembered (``instance_cache``), so the instance's next
episode can start without reading the row and history again; the ETag the
commit is conditional on is what confirms that copy.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from concurrent.futures import Executor

from devhost.durable import history as h
from devhost.durable.episode import Execution, Outcome, Runner, play, start_trace, terminate
from devhost.durable.functions import DurableFunctions
from devhost.durable.history import HistoryEvent, Record
from devhost.durable.instance_cache import InstanceCache
from devhost.durable.instances import InstanceState, ParentRef, RuntimeStatus
from devhost.durable.outbox import Outbox
from devhost.durable.queues import ControlMessage
from devhost.durable.settings import DurableSettings
from devhost.durable.store import InstanceConflict, InstanceStore
from devhost.durable.triage import Triage
from devhost.tracing import TraceCarrier, host_span

log = logging.getLogger("devhost.durable")


class Episodes:
    def __init__(
        self,
        settings: DurableSettings,
        store: InstanceStore,
        outbox: Outbox,
        functions: DurableFunctions,
        executor: Executor,
        cache: InstanceCache,
    ) -> None:
        self._settings = settings
        self._store = store
        self._outbox = outbox
        self._functions = functions
        self._executor = executor
        self._cache = cache

    async def advance(
        self, state: InstanceState, records: list[Record], sorted_out: Triage, consumed: tuple[str, ...]
    ) -> bool:
        """Run episodes until the instance waits (one, or more after a continue-as-new); whether any
        was committed."""
        if state.status.finished:
            # Triage spent whatever arrived for a finished execution (say, a work item's result sent
            # again after a restart, landing after completion). There is nothing to play: ``play`` would
            # find nothing to replay and answer "Running", and committing that would reopen the instance.
            return False
        if state.history_length == 0 and sorted_out.start is None:
            # Pending and its start not among these messages (a stale start was spent, say): there is
            # nothing to play. Committing the empty outcome would mark it Running with no history, and
            # its own start, arriving later, would then be taken for a repeat and dropped (chaos run).
            return False
        incoming = (
            [Record(sorted_out.start.event, message_id=sorted_out.start.message_id)] if sorted_out.start else []
        ) + sorted_out.incoming
        terminate_reason, suspended = sorted_out.terminate_reason, sorted_out.suspended
        committed = False
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
                    return committed
                if outcome.status == RuntimeStatus.CONTINUED_AS_NEW.value:
                    # What this episode received and the old execution did not use is dropped with it (the
                    # Python SDK cannot carry events over); the new execution starts with its input only,
                    # in the trace the first one began in.
                    state, records = await self._continue_as_new(state, outcome, consumed, started_in)
                    incoming, terminate_reason, suspended, committed = [], None, False, True
                    await asyncio.sleep(0)
                    continue
                state, records = await self._commit(state, len(records), outcome)
                self._log_outcome(state)
                return True

    def begin(self, state: InstanceState | None, start: ControlMessage) -> InstanceState:
        event = start.event
        if event["EventType"] != h.EXECUTION_STARTED:
            raise ValueError(f"a start message holds event type {event['EventType']}, not ExecutionStarted")
        keep_created = state is not None and state.execution_id == start.execution_id
        fresh = InstanceState(
            instance_id=start.instance_id,
            name=event["Name"],
            execution_id=str(start.execution_id),
            status=RuntimeStatus.PENDING,
            input=event["Input"],
            parent=ParentRef.from_event(event["ParentInstance"]),
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
        self._cache.forget(start.instance_id)
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
        # episode, which sends the same tasks (same ids) again: at least once. The sends are started
        # ahead of the history write (one gather, in that order): a work item is what the next step
        # waits for, while the history only has to be written before the row below.
        await asyncio.gather(
            *self._outbox.sends(updated, outcome.records, committed),
            self._store.write_history(state.instance_id, state.execution_id, committed, outcome.records[committed:]),
        )
        try:
            updated.etag = await self._store.replace(updated)
        except InstanceConflict:
            updated.etag = await self._commit_over_pending_mark(updated)
        self._cache.remember(updated, outcome.records)
        return updated, outcome.records

    async def _commit_over_pending_mark(self, updated: InstanceState) -> str:
        """The first episode can find the instance row changed under it when it played on a remembered
        copy from before a start's Pending row was written. The row then names this very execution and no history:
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
        trace_context: TraceCarrier | None = None,
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
        self._cache.remember(fresh, records)
        return fresh, records

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


def parent_of(event: HistoryEvent) -> ParentRef | None:
    """The orchestration that started this one, if ``event`` is a sub-orchestration's start."""
    return ParentRef.from_event(event["ParentInstance"]) if event["EventType"] == h.EXECUTION_STARTED else None
