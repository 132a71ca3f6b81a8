"""The messages an episode implies, derived from the history it adds.

A ``TaskScheduled`` without a result means a work item, a ``TimerCreated``
without ``TimerFired`` a timer message, a ``SubOrchestrationInstanceCreated``
without a result the child's start, and an ``ExecutionCompleted`` of a
sub-orchestration the parent's notice. They are sent before the episode
commits (see ``orchestrations``); an episode replayed because its commit did
not happen sends them again, and receivers deduplicate, so a repeat is
harmless (an activity may run again: at least once, as in Azure).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable

from devhost.durable import history as h
from devhost.durable.episode import child_execution_id
from devhost.durable.history import Record
from devhost.durable.instances import InstanceState, ParentRef, RuntimeStatus
from devhost.durable.queues import ControlMessage, TaskHubQueues, WorkItem
from devhost.tracing import current_carrier


class Outbox:
    def __init__(self, queues: TaskHubQueues) -> None:
        self._queues = queues

    def sends(self, state: InstanceState, records: list[Record], start: int) -> list[Awaitable[None]]:
        """The sends the records from ``start`` on imply, not yet started (the caller starts them
        first, so that the store receives them ahead of the episode's other writes)."""
        completed = {c for r in records if (c := r.completes()) is not None}
        sends: list[Awaitable[None]] = []
        for record in records[start:]:
            event = record.event
            if record.type in h.SCHEDULING and record.event_id in completed:
                continue
            if event["EventType"] == h.TASK_SCHEDULED:
                sends.append(
                    self._queues.send_work_item(
                        WorkItem(
                            state.instance_id,
                            state.execution_id,
                            event["EventId"],
                            event["Name"],
                            event["Input"],
                            current_carrier(),
                        )
                    )
                )
            elif event["EventType"] == h.TIMER_CREATED:
                sends.append(self._timer(state, event))
            elif event["EventType"] == h.SUB_ORCHESTRATION_INSTANCE_CREATED:
                sends.append(self._start_child(state, event))
            elif event["EventType"] == h.EXECUTION_COMPLETED and state.parent is not None:
                sends.append(self._notify_parent(state, state.parent))
        return sends

    async def refuse_child(self, parent: ParentRef, child_id: str) -> None:
        reason = f"an orchestration instance with ID '{child_id}' is already running"
        await self._queues.send_control(
            ControlMessage(
                parent.instance_id,
                parent.execution_id,
                h.sub_orchestration_failed(h.now(), parent.task_id, reason, "InvalidOperationException: " + reason),
            )
        )

    async def _timer(self, state: InstanceState, created: h.TimerCreatedEvent) -> None:
        fire_at = created["FireAt"]
        delay = (h.parse_timestamp(fire_at) - h.now()).total_seconds()
        message = ControlMessage(
            state.instance_id,
            state.execution_id,
            h.timer_fired(h.parse_timestamp(fire_at), created["EventId"], fire_at),
        )
        await self._queues.send_control(message, delay=max(0.0, delay))

    async def _start_child(self, state: InstanceState, created: h.SubOrchestrationCreatedEvent) -> None:
        child_id = created["InstanceId"]
        execution_id = child_execution_id(state.execution_id, created["EventId"])
        parent = ParentRef(state.instance_id, state.execution_id, created["EventId"], state.name)
        event = h.execution_started(
            h.now(),
            child_id,
            execution_id,
            created["Name"],
            created["Input"],
            parent.to_event(),
            trace_context=current_carrier(),
        )
        await self._queues.send_control(ControlMessage(child_id, execution_id, event))

    async def _notify_parent(self, state: InstanceState, parent: ParentRef) -> None:
        at = h.now()
        event: h.SubOrchestrationCompletedEvent | h.SubOrchestrationFailedEvent
        if state.status == RuntimeStatus.COMPLETED:
            event = h.sub_orchestration_completed(at, parent.task_id, state.output)
        else:
            failure: h.FailureDetails | dict[str, str] = state.failure or {}
            if state.status == RuntimeStatus.TERMINATED:
                reason = (
                    f"sub-orchestration '{state.name}' ({state.instance_id}) was terminated: "
                    f"{json.loads(state.output or 'null')}"
                )
                details = "TerminatedException"
            else:
                reason = (
                    f"sub-orchestration '{state.name}' ({state.instance_id}) failed: "
                    f"{failure.get('ErrorType', 'Exception')}: {failure.get('ErrorMessage', '')}"
                )
                details = failure.get("ErrorType", "Exception")
            event = h.sub_orchestration_failed(at, parent.task_id, reason, details)
        await self._queues.send_control(ControlMessage(parent.instance_id, parent.execution_id, event))
