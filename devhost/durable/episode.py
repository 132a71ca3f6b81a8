"""One orchestration episode, decided without I/O: new events in, history out.

The engine plays the part the Durable Task Framework plays in Azure. Given
the execution's committed history and the events that arrived, it replays the
orchestrator through the SDK and turns the actions the SDK returns into
history: ``TaskScheduled``, ``TimerCreated`` and
``SubOrchestrationInstanceCreated`` events numbered the way the SDK numbers its
tasks, then ``OrchestratorCompleted`` and, when the orchestrator finished,
``ExecutionCompleted`` (or ``ContinueAsNew``).

Numbering. The SDK gives a task id to each timer, activity and
sub-orchestration in the order it schedules them, and, for ``-WithRetry``
calls, to each retry timer and each later attempt at the moment the failure
(or the retry timer) is replayed. A retry failure never lets the orchestrator
move on, so within an episode the ids run: tasks scheduled before the failure,
then the retry's id. When an episode holds such an event, the orchestrator is
replayed once more up to it to learn how many tasks came before; usually there
is none and the orchestrator runs once.

Determinism. The n-th numbered action of every replay must be what the n-th
one was when first scheduled; if not, the orchestrator is not deterministic
and the instance fails, saying so.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from devhost.durable import history as h
from devhost.durable.actions import (
    ACTIVITIES,
    SUB_ORCHESTRATIONS,
    Action,
    ActionType,
    UnsupportedAction,
    check_supported,
    continue_as_new_input,
    flatten,
    numbered,
)
from devhost.durable.history import EventType, Origin, Record
from devhost.durable.replay import OrchestratorError, OrchestratorResult
from devhost.tracing import TraceCarrier

# (history so far, how many of its events were played before) -> what the orchestrator returned
Runner = Callable[[list[Record], int], Awaitable[OrchestratorResult]]

NON_DETERMINISTIC = "NonDeterministicOrchestrationException"


@dataclass(frozen=True)
class Execution:
    instance_id: str
    execution_id: str
    name: str


@dataclass
class Outcome:
    """The execution's history after the episode and the instance's state to record."""

    records: list[Record]
    status: str
    output: str | None = None
    custom_status: str | None = None
    failure: h.FailureDetails | None = None
    continue_input: str | None = None
    ran: bool = False


def pending_start(records: list[Record]) -> int:
    """Index of the first event after the last ``OrchestratorCompleted``: not yet replayed."""
    for index in range(len(records) - 1, -1, -1):
        if records[index].type == EventType.ORCHESTRATOR_COMPLETED:
            return index + 1
    return 0


def terminate(committed: list[Record], incoming: list[Record], reason: str, at: datetime) -> Outcome:
    output = json.dumps(reason)
    records = (
        committed
        + incoming
        + [Record(h.execution_terminated(at, reason)), Record(h.execution_completed(at, "Terminated", output))]
    )
    return Outcome(records, "Terminated", output=output)


async def play(
    execution: Execution, committed: list[Record], incoming: list[Record], suspended: bool, run: Runner, at: datetime
) -> Outcome:
    """Apply ``incoming`` events; replay the orchestrator if they can move it forward."""
    waiting = committed[pending_start(committed) :] + incoming
    if suspended or not any(r.type in h.ACTIONABLE for r in waiting):
        return Outcome(committed + incoming, "Suspended" if suspended else "Running")
    full = committed + [Record(h.orchestrator_started(at))] + incoming
    replayed = pending_start(committed)
    scheduled = {r.event_id: r for r in committed if r.type in h.SCHEDULING}
    cuts = [i for i in range(replayed, len(full)) if _takes_retry_id(full[i], scheduled)]
    counts = []
    for index in cuts:
        partial = await run(full[: index + 1], replayed)
        counts.append(len(numbered(flatten(partial.state))))
    result = await run(full, replayed)
    outcome = _decide(execution, committed, full, scheduled, list(zip(cuts, counts, strict=True)), result, at)
    outcome.ran = True
    return outcome


def _origin_of(record: Record, scheduled: dict[int, Record]) -> Origin | None:
    """How the task that ``record`` completes was scheduled."""
    task_id = record.completes()
    origin_record = scheduled.get(task_id) if task_id is not None else None
    return origin_record.origin if origin_record is not None else None


def _takes_retry_id(record: Record, scheduled: dict[int, Record]) -> bool:
    origin = _origin_of(record, scheduled)
    if origin is None:
        return False
    if record.type in h.FAILURES:
        return origin.with_retry
    if record.type == EventType.TIMER_FIRED:
        return origin.role == "retry-timer" and origin.attempt < origin.max_attempts
    return False


def _decide(
    execution: Execution,
    committed: list[Record],
    full: list[Record],
    scheduled: dict[int, Record],
    cuts: list[tuple[int, int]],
    result: OrchestratorResult,
    at: datetime,
) -> Outcome:
    custom_status = _custom_status(result)
    if result.error is not None:
        return _failed(execution, full, result.error, at, custom_status)
    actions = flatten(result.state)
    try:
        check_supported(actions)
    except UnsupportedAction as error:
        return _failed(execution, full, OrchestratorError("NotSupportedException", str(error)), at, custom_status)
    tasks = numbered(actions)
    firsts = sorted(
        (r for r in committed if r.origin and r.origin.role == "first"), key=lambda r: r.origin.slot if r.origin else 0
    )
    mismatch = _nondeterminism(firsts, tasks)
    if mismatch:
        return _failed(execution, full, OrchestratorError(NON_DETERMINISTIC, mismatch), at, custom_status)
    new = _schedule(execution, tasks, len(firsts), cuts, full, scheduled, _next_id(committed), at)
    records = full + new + [Record(h.orchestrator_completed(at))]
    if not result.done:
        return Outcome(records, "Running", custom_status=custom_status)
    again, next_input = continue_as_new_input(actions)
    if again:
        records.append(Record(h.continue_as_new(at, next_input)))
        return Outcome(records, "ContinuedAsNew", custom_status=custom_status, continue_input=next_input)
    output = json.dumps(result.output)
    records.append(Record(h.execution_completed(at, "Completed", output)))
    return Outcome(records, "Completed", output=output, custom_status=custom_status)


def _custom_status(result: OrchestratorResult) -> str | None:
    value = result.custom_status
    return None if value is None else json.dumps(value)


def _failed(
    execution: Execution, full: list[Record], error: OrchestratorError, at: datetime, custom_status: str | None
) -> Outcome:
    message = f"Orchestrator function '{execution.name}' failed: {error.error_type}: {error.message}"
    output = json.dumps(message)
    failure = error.failure_details()
    records = full + [
        Record(h.orchestrator_completed(at)),
        Record(h.execution_completed(at, "Failed", output, failure)),
    ]
    return Outcome(records, "Failed", output=output, custom_status=custom_status, failure=failure)


def _next_id(committed: list[Record]) -> int:
    return max((r.event_id for r in committed if r.type in h.SCHEDULING), default=-1) + 1


def _nondeterminism(firsts: list[Record], tasks: list[Action]) -> str | None:
    for slot, record in enumerate(firsts):
        expected = _describe_record(record)
        if slot >= len(tasks):
            return (
                f"Non-deterministic workflow detected: a previous execution of this orchestration scheduled "
                f"{expected} as task {record.event_id}, but this replay did not schedule it. Orchestrator code "
                "must make the same calls in the same order on every replay."
            )
        if not _same_call(record, tasks[slot]):
            return (
                f"Non-deterministic workflow detected: a previous execution of this orchestration scheduled "
                f"{expected} as task {record.event_id}, but this replay scheduled {tasks[slot].describe()} "
                "there instead. Orchestrator code must make the same calls in the same order on every replay."
            )
    return None


def _describe_record(record: Record) -> str:
    event = record.event
    if event["EventType"] == h.TASK_SCHEDULED:
        return f"activity '{event['Name']}'"
    if event["EventType"] == h.SUB_ORCHESTRATION_INSTANCE_CREATED:
        return f"sub-orchestration '{event['Name']}'"
    return "a timer"


def _same_call(record: Record, action: Action) -> bool:
    event = record.event
    if event["EventType"] == h.TASK_SCHEDULED:
        return action.type in ACTIVITIES and action.name == event["Name"]
    if event["EventType"] == h.SUB_ORCHESTRATION_INSTANCE_CREATED:
        return action.type in SUB_ORCHESTRATIONS and action.name == event["Name"]
    return action.type == ActionType.CREATE_TIMER


def _schedule(
    execution: Execution,
    tasks: list[Action],
    known: int,
    cuts: list[tuple[int, int]],
    full: list[Record],
    scheduled: dict[int, Record],
    next_id: int,
    at: datetime,
) -> list[Record]:
    """Scheduling events for the tasks this episode added, in the order the SDK numbered them."""
    new: list[Record] = []
    done = known
    for index, count in cuts:
        for slot in range(done, count):
            new.append(_first_attempt(execution, tasks[slot], slot, next_id, at))
            next_id += 1
        done = max(done, count)
        retry = _retry_step(execution, full[index], scheduled, tasks, next_id, at)
        if retry is not None:
            new.append(retry)
            next_id += 1
    for slot in range(done, len(tasks)):
        new.append(_first_attempt(execution, tasks[slot], slot, next_id, at))
        next_id += 1
    return new


def _first_attempt(execution: Execution, action: Action, slot: int, event_id: int, at: datetime) -> Record:
    origin = Origin(
        slot,
        "first",
        1,
        action.with_retry,
        action.max_attempts if action.with_retry else 1,
        action.retry_interval_ms if action.with_retry else 0,
    )
    return _attempt(execution, action, origin, event_id, at)


def _attempt(execution: Execution, action: Action, origin: Origin, event_id: int, at: datetime) -> Record:
    if action.type in ACTIVITIES:
        return Record(h.task_scheduled(at, event_id, action.name, action.input), origin)
    if action.type in SUB_ORCHESTRATIONS:
        child = action.instance_id or child_instance_id(execution, event_id)
        return Record(h.sub_orchestration_created(at, event_id, action.name, child, action.input), origin)
    return Record(h.timer_created(at, event_id, h.parse_timestamp(action.fire_at)), origin)


def _retry_step(
    execution: Execution, event: Record, scheduled: dict[int, Record], tasks: list[Action], event_id: int, at: datetime
) -> Record | None:
    """After a failed attempt: a retry timer; after a retry timer: the next attempt."""
    origin = _origin_of(event, scheduled)
    assert origin is not None
    if event.type in h.FAILURES:
        timer = Origin(origin.slot, "retry-timer", origin.attempt, True, origin.max_attempts, origin.retry_interval_ms)
        fire_at = at + timedelta(milliseconds=origin.retry_interval_ms)
        return Record(h.timer_created(at, event_id, fire_at), timer)
    if origin.slot >= len(tasks):
        return None
    attempt = Origin(
        origin.slot, "retry-attempt", origin.attempt + 1, True, origin.max_attempts, origin.retry_interval_ms
    )
    return _attempt(execution, tasks[origin.slot], attempt, event_id, at)


def child_instance_id(execution: Execution, event_id: int) -> str:
    """A sub-orchestration's id when the orchestrator gave none: stable, so a resend finds the same child."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"durable:{execution.execution_id}:{event_id}").hex


def child_execution_id(parent_execution_id: str, event_id: int) -> str:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"durable-child:{parent_execution_id}:{event_id}").hex


def start_trace(records: list[Record]) -> TraceCarrier:
    """The W3C carrier the execution was started in (``ParentTraceContext`` of ``ExecutionStarted``), or ``{}``."""
    for record in records:
        if record.event["EventType"] == h.EXECUTION_STARTED:
            context = record.event.get("ParentTraceContext")
            if context is None:
                return {}
            carrier: TraceCarrier = {}
            if parent := context.get("TraceParent"):
                carrier["traceparent"] = str(parent)
            if state := context.get("TraceState"):
                carrier["tracestate"] = str(state)
            return carrier
    return {}


def start_input(records: list[Record]) -> tuple[str | None, str | None]:
    """The execution's input and parent instance id, from its ``ExecutionStarted`` event."""
    for record in records:
        if record.event["EventType"] == h.EXECUTION_STARTED:
            parent = record.event.get("ParentInstance")
            parent_id = parent["OrchestrationInstance"].get("InstanceId") if parent else None
            return record.event.get("Input"), parent_id
    return None, None
