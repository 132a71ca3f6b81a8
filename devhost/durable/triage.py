"""Which received messages an instance applies, which wait, and which are spent.

Messages arrive at least once and in no guaranteed order, so before an
episode each one is sorted out against the instance's state and history:

- a start (``ExecutionStarted``) begins an execution if the instance is new,
  pending with that execution, or finished (starting again replaces it); a
  repeat of the same start is a duplicate; another start while it runs is
  refused (and a parent waiting on it is told);
- a task result or timer applies once, to the execution that scheduled it;
  repeats and results for an earlier execution are spent;
- an external event applies once (by message id); while the instance is
  suspended, events are recorded but not replayed until it resumes;
- terminate, suspend and resume apply if the instance is in a state they
  change;
- anything for an instance that has not started yet waits; anything for a
  finished or unknown instance is spent, and logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from devhost.durable import history as h
from devhost.durable.history import EventType, Record
from devhost.durable.instances import InstanceState, RuntimeStatus
from devhost.durable.queues import ControlMessage

log = logging.getLogger("devhost.durable")


@dataclass
class Triage:
    start: ControlMessage | None = None
    incoming: list[Record] = field(default_factory=list)
    terminate_reason: str | None = None
    suspended: bool = False
    postponed: list[int] = field(default_factory=list)  # indexes of messages to handle later
    refused_starts: list[ControlMessage] = field(default_factory=list)


def triage(state: InstanceState | None, records: list[Record], messages: list[ControlMessage]) -> Triage:
    result = Triage(suspended=state is not None and state.status == RuntimeStatus.SUSPENDED)
    execution = state.execution_id if state else None
    started = state is not None and state.history_length > 0
    finished = state is not None and state.status.finished
    scheduled = {r.event_id for r in records if r.type in h.SCHEDULING}
    completed = {c for r in records if (c := r.completes()) is not None}
    seen_events = {r.message_id for r in records if r.message_id}
    for index, message in enumerate(messages):
        kind = int(message.event["EventType"])
        if kind == EventType.EXECUTION_STARTED:
            if _begins(state, started, finished, message) and result.start is None:
                result.start = message
                execution, started, finished = message.execution_id, True, False
                scheduled, completed, seen_events = set(), set(), set()
                result.incoming.clear()
                result.terminate_reason = None
                result.suspended = False
            elif message.execution_id != execution:
                result.refused_starts.append(message)
            continue
        if not started:
            if state is not None and state.status == RuntimeStatus.PENDING:
                result.postponed.append(index)
            else:
                _spent(message, "the instance does not exist")
            continue
        if finished or result.terminate_reason is not None:
            _spent(message, "the instance has already finished")
            continue
        record = _apply(result, message, kind, execution, scheduled, completed, seen_events)
        if record is not None:
            result.incoming.append(record)
    return result


def _begins(state: InstanceState | None, started: bool, finished: bool, message: ControlMessage) -> bool:
    if state is None:
        return True
    if finished:
        return message.execution_id != state.execution_id
    return not started and message.execution_id == state.execution_id


def _apply(result: Triage, message: ControlMessage, kind: int, execution: str | None, scheduled: set[int],
           completed: set[int], seen_events: set[str]) -> Record | None:
    event = message.event
    if kind in h.COMPLETIONS:
        task_id = int(event[h.COMPLETIONS[kind]])
        if message.execution_id != execution:
            return _spent(message, "it belongs to an earlier execution")
        if task_id not in scheduled:
            return _spent(message, f"task {task_id} was never scheduled")
        if task_id in completed:
            return None  # a repeat delivery (at least once): already applied
        completed.add(task_id)
        return Record(event, message_id=message.message_id)
    if kind == EventType.EVENT_RAISED:
        if message.message_id in seen_events:
            return None
        seen_events.add(message.message_id)
        return Record(event, message_id=message.message_id)
    if kind == EventType.EXECUTION_TERMINATED:
        result.terminate_reason = str(event.get("Input") or "")
        return None
    if kind == EventType.EXECUTION_SUSPENDED:
        if result.suspended:
            return None
        result.suspended = True
        return Record(event, message_id=message.message_id)
    if kind == EventType.EXECUTION_RESUMED:
        if not result.suspended:
            return None
        result.suspended = False
        return Record(event, message_id=message.message_id)
    return _spent(message, f"event type {kind} is not a message the engine handles")


def _spent(message: ControlMessage, why: str) -> None:
    log.info("discarding %s for instance %s: %s",
             _event_name(int(message.event["EventType"])), message.instance_id, why)
    return None


def _event_name(kind: int) -> str:
    try:
        return EventType(kind).name.title().replace("_", "")
    except ValueError:
        return f"event type {kind}"
