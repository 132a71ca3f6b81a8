"""Which received messages an instance applies, which wait, and which are spent.

Messages arrive at least once and in no guaranteed order, so before an
episode each one is sorted out against the instance's state and history:

- a start (``ExecutionStarted``) begins the execution it names if the
  instance is new or is pending with that execution (the management API
  records the pending execution when it sends the start); a repeat of the
  same start is a duplicate. A start of another execution that was sent
  after the current one began replaces it, running or finished, as the
  Azure Storage provider replaces an instance (``overridableExistingInstanceStates``
  is enforced by the API, before the start is sent); a start sent before the
  current execution began is stale and spent. A sub-orchestration's start never
  replaces a running instance: it is refused, and the parent is told;
- a task result or timer applies once, to the execution that scheduled it;
  repeats and results for another execution are spent. A result for a task
  the execution has not recorded is *early*: its scheduling episode sent the
  work before committing, and the commit is still to come (after a crash,
  when the episode is replayed), so it waits;
- an external event applies once (by message id, including the messages a
  previous execution consumed before it continued as new); while the
  instance is suspended, events are recorded but not replayed until it resumes;
- terminate, suspend and resume apply if the instance is in a state they
  change;
- anything for an instance that has not started yet waits; anything for a
  finished or unknown instance is spent, and logged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum

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
    early: list[int] = field(default_factory=list)  # indexes of results for tasks not recorded (yet)
    refused_starts: list[ControlMessage] = field(default_factory=list)


class _Start(Enum):
    BEGIN = "begin"
    REPEAT = "repeat"
    STALE = "stale"
    REFUSE = "refuse"


def triage(state: InstanceState | None, records: list[Record], messages: list[ControlMessage]) -> Triage:
    result = Triage(suspended=state is not None and state.status == RuntimeStatus.SUSPENDED)
    execution = state.execution_id if state else None
    since = state.created if state else None
    started = state is not None and state.history_length > 0
    finished = state is not None and state.status.finished
    scheduled = {r.event_id for r in records if r.type in h.SCHEDULING}
    completed = {c for r in records if (c := r.completes()) is not None}
    seen_events = {r.message_id for r in records if r.message_id} | {c for r in records for c in r.consumed}
    for index, message in enumerate(messages):
        kind = message.event["EventType"]
        if kind == EventType.EXECUTION_STARTED:
            verdict = _start_verdict(execution, since, started, finished, message)
            if verdict == _Start.BEGIN:  # (a later start in the same batch replaces an earlier one)
                result.start = message
                execution, since, started, finished = message.execution_id, _sent_at(message), True, False
                scheduled, completed, seen_events = set(), set(), set()
                result.incoming.clear()
                result.terminate_reason = None
                result.suspended = False
            elif verdict == _Start.REFUSE:
                result.refused_starts.append(message)
            elif verdict == _Start.STALE:
                spent(message, f"it is older than the current execution {execution}")
            continue
        if not started:
            if state is not None and state.status == RuntimeStatus.PENDING:
                result.postponed.append(index)
            else:
                spent(message, "the instance does not exist")
            continue
        if finished or result.terminate_reason is not None:
            spent(message, "the instance has already finished")
            continue
        if kind in h.COMPLETIONS and message.execution_id == execution and task_of(message) not in scheduled:
            result.early.append(index)
            continue
        record = _apply(result, message, kind, execution, completed, seen_events)
        if record is not None:
            result.incoming.append(record)
    return result


def _start_verdict(
    execution: str | None, since: datetime | None, started: bool, finished: bool, message: ControlMessage
) -> _Start:
    if execution is None:
        return _Start.BEGIN  # a new instance
    if message.execution_id == execution:
        return _Start.REPEAT if started else _Start.BEGIN  # the pending execution, or a repeat delivery
    if since is not None and _sent_at(message) <= since:
        return _Start.STALE  # a start the current execution already replaced, delivered again
    if finished:
        return _Start.BEGIN
    if message.event["EventType"] == h.EXECUTION_STARTED and message.event["ParentInstance"]:
        return _Start.REFUSE  # a sub-orchestration never replaces a running instance
    return _Start.BEGIN  # a client's start replaces the running execution (overridableExistingInstanceStates)


def _sent_at(message: ControlMessage) -> datetime:
    return h.parse_timestamp(message.event["Timestamp"])


def task_of(message: ControlMessage) -> int:
    """The task id a result or timer message completes (``ValueError`` for any other message)."""
    task = h.completed_task(message.event)
    if task is None:
        raise ValueError(f"event type {message.event['EventType']} completes no task")
    return task


def _apply(
    result: Triage,
    message: ControlMessage,
    kind: int,
    execution: str | None,
    completed: set[int],
    seen_events: set[str],
) -> Record | None:
    event = message.event
    if kind in h.COMPLETIONS:
        task_id = task_of(message)
        if message.execution_id != execution:
            spent(message, "it belongs to another execution")
            return None
        if task_id in completed:
            return None  # a repeat delivery (at least once): already applied
        completed.add(task_id)
        return Record(event, message_id=message.message_id)
    if kind == EventType.EVENT_RAISED:
        if message.message_id in seen_events:
            return None
        seen_events.add(message.message_id)
        return Record(event, message_id=message.message_id)
    if event["EventType"] == h.EXECUTION_TERMINATED:
        result.terminate_reason = str(event["Input"] or "")
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
    spent(message, f"event type {kind} is not a message the engine handles")
    return None


def spent(message: ControlMessage, why: str) -> None:
    """Log why ``message`` is discarded (it is deleted with the others handled)."""
    log.info("discarding %s for instance %s: %s", _event_name(message.event["EventType"]), message.instance_id, why)


def _event_name(kind: int) -> str:
    try:
        return str(EventType(kind).name).title().replace("_", "")  # the SDK's enum: untyped, so Any
    except ValueError:
        return f"event type {kind}"
