"""History events in the JSON shape the Functions host hands the Python SDK.

Each event is the Durable Task Framework event serialised with its .NET
property names (``EventType``, ``EventId``, ``TaskScheduledId``, ...), because
the SDK's replay (``TaskOrchestrationExecutor``) reads exactly those names.
A :class:`Record` pairs an event with what the engine needs to know about it
and the SDK never sees: why a task was scheduled (for retries and the
determinism check) and which queue message brought an event (for dedupe).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from azure.durable_functions.models.history import HistoryEventType as EventType

__all__ = [
    "EventType",
    "Origin",
    "Record",
    "COMPLETIONS",
    "FAILURES",
    "SCHEDULING",
    "ACTIONABLE",
    "now",
    "timestamp",
    "parse_timestamp",
]

# completion event type -> the property that names the task it completes
COMPLETIONS: dict[int, str] = {
    EventType.TASK_COMPLETED: "TaskScheduledId",
    EventType.TASK_FAILED: "TaskScheduledId",
    EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED: "TaskScheduledId",
    EventType.SUB_ORCHESTRATION_INSTANCE_FAILED: "TaskScheduledId",
    EventType.TIMER_FIRED: "TimerId",
}
FAILURES = {EventType.TASK_FAILED, EventType.SUB_ORCHESTRATION_INSTANCE_FAILED}
SCHEDULING = {EventType.TASK_SCHEDULED, EventType.TIMER_CREATED, EventType.SUB_ORCHESTRATION_INSTANCE_CREATED}
# events that move the orchestrator forward when replayed (others are bookkeeping)
ACTIONABLE = {EventType.EXECUTION_STARTED, EventType.EVENT_RAISED, *COMPLETIONS}

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # the SDK's DATETIME_STRING_FORMAT


def now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_FORMAT)


def parse_timestamp(text: str) -> datetime:
    cleaned = text.strip().replace("Z", "+00:00")
    if "." in cleaned:  # .NET writes up to 7 fractional digits; Python reads 6
        head, _, tail = cleaned.partition(".")
        digits = "".join(c for c in tail if c.isdigit())
        zone = tail[len(digits) :]
        cleaned = f"{head}.{digits[:6].ljust(6, '0')}{zone}"
    moment = datetime.fromisoformat(cleaned)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Origin:
    """Why the engine scheduled a task: the orchestrator's n-th numbered action
    (``slot``), or, for a -WithRetry call, a retry timer or a later attempt of it."""

    slot: int
    role: str = "first"  # "first" | "retry-timer" | "retry-attempt"
    attempt: int = 1
    with_retry: bool = False
    max_attempts: int = 1
    retry_interval_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "role": self.role,
            "attempt": self.attempt,
            "withRetry": self.with_retry,
            "maxAttempts": self.max_attempts,
            "retryIntervalMs": self.retry_interval_ms,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Origin:
        return cls(
            int(data["slot"]),
            str(data["role"]),
            int(data["attempt"]),
            bool(data["withRetry"]),
            int(data["maxAttempts"]),
            int(data["retryIntervalMs"]),
        )


@dataclass
class Record:
    """A history event, with what the engine keeps beside it.

    ``message_id``: the queue message that brought the event (for dedupe).
    ``consumed``: on a ``continue_as_new`` execution's ``ExecutionStarted``,
    the messages the previous execution's last episode applied; should one of
    them come back (its delete was cut short), it is recognised and not
    handed to the new execution.
    """

    event: dict[str, Any]
    origin: Origin | None = None
    message_id: str | None = None
    consumed: tuple[str, ...] = ()

    @property
    def type(self) -> int:
        return int(self.event["EventType"])

    @property
    def event_id(self) -> int:
        return int(self.event.get("EventId", -1))

    def completes(self) -> int | None:
        """The task id this event completes, if it is a completion."""
        key = COMPLETIONS.get(self.type)
        return int(self.event[key]) if key else None


def _event(event_type: int, at: datetime, event_id: int = -1, **fields: Any) -> dict[str, Any]:
    return {"EventType": int(event_type), "EventId": event_id, "IsPlayed": False, "Timestamp": timestamp(at), **fields}


def orchestrator_started(at: datetime) -> dict[str, Any]:
    return _event(EventType.ORCHESTRATOR_STARTED, at)


def orchestrator_completed(at: datetime) -> dict[str, Any]:
    return _event(EventType.ORCHESTRATOR_COMPLETED, at)


def execution_started(
    at: datetime,
    instance_id: str,
    execution_id: str,
    name: str,
    input_json: str | None,
    parent: dict[str, Any] | None = None,
    trace_context: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``trace_context``: the W3C context the instance was started in (``traceparent``, ``tracestate``),
    kept as the Durable Task Framework keeps it (``ParentTraceContext``) for distributed tracing."""
    extra: dict[str, Any] = {}
    if trace_context and trace_context.get("traceparent"):
        extra["ParentTraceContext"] = {
            "TraceParent": trace_context["traceparent"],
            "TraceState": trace_context.get("tracestate"),
        }
    return _event(
        EventType.EXECUTION_STARTED,
        at,
        OrchestrationInstance={"InstanceId": instance_id, "ExecutionId": execution_id},
        ParentInstance=parent,
        Name=name,
        Version="",
        Input=input_json,
        Tags=None,
        ScheduledStartTime=None,
        Generation=0,
        **extra,
    )


def task_scheduled(at: datetime, event_id: int, name: str, input_json: str | None) -> dict[str, Any]:
    return _event(EventType.TASK_SCHEDULED, at, event_id, Name=name, Version="", Input=input_json)


def task_completed(at: datetime, task_id: int, result_json: str | None) -> dict[str, Any]:
    return _event(EventType.TASK_COMPLETED, at, TaskScheduledId=task_id, Result=result_json)


def task_failed(at: datetime, task_id: int, reason: str, details: str, error_type: str) -> dict[str, Any]:
    return _event(
        EventType.TASK_FAILED,
        at,
        TaskScheduledId=task_id,
        Reason=reason,
        Details=details,
        FailureDetails={"ErrorType": error_type, "ErrorMessage": reason},
    )


def timer_created(at: datetime, event_id: int, fire_at: datetime) -> dict[str, Any]:
    return _event(EventType.TIMER_CREATED, at, event_id, FireAt=timestamp(fire_at))


def timer_fired(at: datetime, timer_id: int, fire_at: str) -> dict[str, Any]:
    return _event(EventType.TIMER_FIRED, at, TimerId=timer_id, FireAt=fire_at)


def sub_orchestration_created(
    at: datetime, event_id: int, name: str, instance_id: str, input_json: str | None
) -> dict[str, Any]:
    return _event(
        EventType.SUB_ORCHESTRATION_INSTANCE_CREATED,
        at,
        event_id,
        Name=name,
        Version="",
        InstanceId=instance_id,
        Input=input_json,
    )


def sub_orchestration_completed(at: datetime, task_id: int, result_json: str | None) -> dict[str, Any]:
    return _event(EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED, at, TaskScheduledId=task_id, Result=result_json)


def sub_orchestration_failed(at: datetime, task_id: int, reason: str, details: str) -> dict[str, Any]:
    return _event(
        EventType.SUB_ORCHESTRATION_INSTANCE_FAILED, at, TaskScheduledId=task_id, Reason=reason, Details=details
    )


def event_raised(at: datetime, name: str, input_json: str | None) -> dict[str, Any]:
    return _event(EventType.EVENT_RAISED, at, Name=name, Input=input_json)


def execution_completed(
    at: datetime, status: str, result_json: str | None, failure: dict[str, str] | None = None
) -> dict[str, Any]:
    return _event(
        EventType.EXECUTION_COMPLETED, at, OrchestrationStatus=status, Result=result_json, FailureDetails=failure
    )


def execution_terminated(at: datetime, reason: str) -> dict[str, Any]:
    return _event(EventType.EXECUTION_TERMINATED, at, Input=reason)


def execution_suspended(at: datetime, reason: str) -> dict[str, Any]:
    return _event(EventType.EXECUTION_SUSPENDED, at, Reason=reason)


def execution_resumed(at: datetime, reason: str) -> dict[str, Any]:
    return _event(EventType.EXECUTION_RESUMED, at, Reason=reason)


def continue_as_new(at: datetime, input_json: str | None) -> dict[str, Any]:
    return _event(EventType.CONTINUE_AS_NEW, at, Result=input_json)
