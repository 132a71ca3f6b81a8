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
from typing import Final, Literal, NotRequired, TypedDict, cast

from azure.durable_functions.models.history import HistoryEventType as EventType

from devhost.tracing import TraceCarrier

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
    "HistoryEvent",
    "history_event",
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

# The SDK's HistoryEventType numbers as literal types (its enum is untyped, so Any to mypy): each
# event's TypedDict is tagged with its number, and comparing ``event["EventType"]`` with one of these
# narrows a :data:`HistoryEvent` to that event (tests/durable/test_history_types.py pins them to the SDK).
EXECUTION_STARTED: Final = 0
EXECUTION_COMPLETED: Final = 1
EXECUTION_TERMINATED: Final = 3
TASK_SCHEDULED: Final = 4
TASK_COMPLETED: Final = 5
TASK_FAILED: Final = 6
SUB_ORCHESTRATION_INSTANCE_CREATED: Final = 7
SUB_ORCHESTRATION_INSTANCE_COMPLETED: Final = 8
SUB_ORCHESTRATION_INSTANCE_FAILED: Final = 9
TIMER_CREATED: Final = 10
TIMER_FIRED: Final = 11
ORCHESTRATOR_STARTED: Final = 12
ORCHESTRATOR_COMPLETED: Final = 13
EVENT_RAISED: Final = 15
CONTINUE_AS_NEW: Final = 16
EXECUTION_SUSPENDED: Final = 19
EXECUTION_RESUMED: Final = 20


class OrchestrationInstance(TypedDict):
    InstanceId: str
    ExecutionId: str


class ParentInstance(TypedDict):
    """``ExecutionStarted.ParentInstance``: the orchestration that started this one, and its task id."""

    Name: str
    Version: str
    TaskScheduleId: int
    OrchestrationInstance: OrchestrationInstance


class ParentTraceContext(TypedDict):
    TraceParent: str
    TraceState: str | None


class FailureDetails(TypedDict):
    ErrorType: str
    ErrorMessage: str


class OriginJson(TypedDict):
    """:class:`Origin` as kept beside a history row (``Origin`` column); the SDK never sees it."""

    slot: int
    role: str
    attempt: int
    withRetry: bool
    maxAttempts: int
    retryIntervalMs: int


# The members every event has, in the order they are written (the constructors below put ``EventType`` first).
class _Stamp(TypedDict):
    EventId: int
    IsPlayed: bool
    Timestamp: str


class OrchestratorStartedEvent(_Stamp):
    EventType: Literal[12]


class OrchestratorCompletedEvent(_Stamp):
    EventType: Literal[13]


class ExecutionStartedEvent(_Stamp):
    EventType: Literal[0]
    OrchestrationInstance: OrchestrationInstance
    ParentInstance: ParentInstance | None
    Name: str
    Version: str
    Input: str | None  # JSON text of the user's input
    Tags: None
    ScheduledStartTime: None
    Generation: int
    ParentTraceContext: NotRequired[ParentTraceContext]


class TaskScheduledEvent(_Stamp):
    EventType: Literal[4]
    Name: str
    Version: str
    Input: str | None


class TaskCompletedEvent(_Stamp):
    EventType: Literal[5]
    TaskScheduledId: int
    Result: str | None


class TaskFailedEvent(_Stamp):
    EventType: Literal[6]
    TaskScheduledId: int
    Reason: str
    Details: str
    FailureDetails: FailureDetails


class TimerCreatedEvent(_Stamp):
    EventType: Literal[10]
    FireAt: str


class TimerFiredEvent(_Stamp):
    EventType: Literal[11]
    TimerId: int
    FireAt: str


class SubOrchestrationCreatedEvent(_Stamp):
    EventType: Literal[7]
    Name: str
    Version: str
    InstanceId: str
    Input: str | None


class SubOrchestrationCompletedEvent(_Stamp):
    EventType: Literal[8]
    TaskScheduledId: int
    Result: str | None


class SubOrchestrationFailedEvent(_Stamp):
    EventType: Literal[9]
    TaskScheduledId: int
    Reason: str
    Details: str


class EventRaisedEvent(_Stamp):
    EventType: Literal[15]
    Name: str
    Input: str | None


class ExecutionCompletedEvent(_Stamp):
    EventType: Literal[1]
    OrchestrationStatus: str
    Result: str | None
    FailureDetails: FailureDetails | None


class ExecutionTerminatedEvent(_Stamp):
    EventType: Literal[3]
    Input: str  # the reason, as the Durable Task Framework keeps it


class ExecutionSuspendedEvent(_Stamp):
    EventType: Literal[19]
    Reason: str


class ExecutionResumedEvent(_Stamp):
    EventType: Literal[20]
    Reason: str


class ContinueAsNewEvent(_Stamp):
    EventType: Literal[16]
    Result: str | None  # the next execution's input


HistoryEvent = (
    OrchestratorStartedEvent
    | OrchestratorCompletedEvent
    | ExecutionStartedEvent
    | TaskScheduledEvent
    | TaskCompletedEvent
    | TaskFailedEvent
    | TimerCreatedEvent
    | TimerFiredEvent
    | SubOrchestrationCreatedEvent
    | SubOrchestrationCompletedEvent
    | SubOrchestrationFailedEvent
    | EventRaisedEvent
    | ExecutionCompletedEvent
    | ExecutionTerminatedEvent
    | ExecutionSuspendedEvent
    | ExecutionResumedEvent
    | ContinueAsNewEvent
)
_KNOWN = {
    EXECUTION_STARTED,
    EXECUTION_COMPLETED,
    EXECUTION_TERMINATED,
    TASK_SCHEDULED,
    TASK_COMPLETED,
    TASK_FAILED,
    SUB_ORCHESTRATION_INSTANCE_CREATED,
    SUB_ORCHESTRATION_INSTANCE_COMPLETED,
    SUB_ORCHESTRATION_INSTANCE_FAILED,
    TIMER_CREATED,
    TIMER_FIRED,
    ORCHESTRATOR_STARTED,
    ORCHESTRATOR_COMPLETED,
    EVENT_RAISED,
    CONTINUE_AS_NEW,
    EXECUTION_SUSPENDED,
    EXECUTION_RESUMED,
}


def history_event(value: object) -> HistoryEvent:
    """An event read back (from a history row or a queue message) as the engine wrote it.

    The engine is the only writer of these documents, so the type is checked, not every member:
    ``ValueError`` for anything that is not an object with an event type the engine writes."""
    if not isinstance(value, dict) or value.get("EventType") not in _KNOWN or not isinstance(value["EventType"], int):
        raise ValueError("not a history event the engine writes")
    return cast(HistoryEvent, value)


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

    def to_json(self) -> OriginJson:
        return {
            "slot": self.slot,
            "role": self.role,
            "attempt": self.attempt,
            "withRetry": self.with_retry,
            "maxAttempts": self.max_attempts,
            "retryIntervalMs": self.retry_interval_ms,
        }

    @classmethod
    def from_json(cls, data: OriginJson) -> Origin:
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

    event: HistoryEvent
    origin: Origin | None = None
    message_id: str | None = None
    consumed: tuple[str, ...] = ()

    @property
    def type(self) -> int:
        return self.event["EventType"]

    @property
    def event_id(self) -> int:
        return self.event["EventId"]

    def completes(self) -> int | None:
        """The task id this event completes, if it is a completion."""
        return completed_task(self.event)


def completed_task(event: HistoryEvent) -> int | None:
    """The task id ``event`` completes (``TaskScheduledId``, or a timer's ``TimerId``), if it is a completion."""
    if event["EventType"] in (
        TASK_COMPLETED,
        TASK_FAILED,
        SUB_ORCHESTRATION_INSTANCE_COMPLETED,
        SUB_ORCHESTRATION_INSTANCE_FAILED,
    ):
        return event["TaskScheduledId"]
    if event["EventType"] == TIMER_FIRED:
        return event["TimerId"]
    return None


def _stamp(at: datetime, event_id: int = -1) -> _Stamp:
    return {"EventId": event_id, "IsPlayed": False, "Timestamp": timestamp(at)}


def orchestrator_started(at: datetime) -> OrchestratorStartedEvent:
    return {"EventType": ORCHESTRATOR_STARTED, **_stamp(at)}


def orchestrator_completed(at: datetime) -> OrchestratorCompletedEvent:
    return {"EventType": ORCHESTRATOR_COMPLETED, **_stamp(at)}


def execution_started(
    at: datetime,
    instance_id: str,
    execution_id: str,
    name: str,
    input_json: str | None,
    parent: ParentInstance | None = None,
    trace_context: TraceCarrier | None = None,
) -> ExecutionStartedEvent:
    """``trace_context``: the W3C context the instance was started in (``traceparent``, ``tracestate``),
    kept as the Durable Task Framework keeps it (``ParentTraceContext``) for distributed tracing."""
    event: ExecutionStartedEvent = {  # (the stamp spelled out: ``**`` cannot make a TypedDict with optional keys)
        "EventType": EXECUTION_STARTED,
        "EventId": -1,
        "IsPlayed": False,
        "Timestamp": timestamp(at),
        "OrchestrationInstance": {"InstanceId": instance_id, "ExecutionId": execution_id},
        "ParentInstance": parent,
        "Name": name,
        "Version": "",
        "Input": input_json,
        "Tags": None,
        "ScheduledStartTime": None,
        "Generation": 0,
    }
    if trace_context and trace_context.get("traceparent"):
        event["ParentTraceContext"] = {
            "TraceParent": trace_context["traceparent"],
            "TraceState": trace_context.get("tracestate"),
        }
    return event


def task_scheduled(at: datetime, event_id: int, name: str, input_json: str | None) -> TaskScheduledEvent:
    return {"EventType": TASK_SCHEDULED, **_stamp(at, event_id), "Name": name, "Version": "", "Input": input_json}


def task_completed(at: datetime, task_id: int, result_json: str | None) -> TaskCompletedEvent:
    return {"EventType": TASK_COMPLETED, **_stamp(at), "TaskScheduledId": task_id, "Result": result_json}


def task_failed(at: datetime, task_id: int, reason: str, details: str, error_type: str) -> TaskFailedEvent:
    return {
        "EventType": TASK_FAILED,
        **_stamp(at),
        "TaskScheduledId": task_id,
        "Reason": reason,
        "Details": details,
        "FailureDetails": {"ErrorType": error_type, "ErrorMessage": reason},
    }


def timer_created(at: datetime, event_id: int, fire_at: datetime) -> TimerCreatedEvent:
    return {"EventType": TIMER_CREATED, **_stamp(at, event_id), "FireAt": timestamp(fire_at)}


def timer_fired(at: datetime, timer_id: int, fire_at: str) -> TimerFiredEvent:
    return {"EventType": TIMER_FIRED, **_stamp(at), "TimerId": timer_id, "FireAt": fire_at}


def sub_orchestration_created(
    at: datetime, event_id: int, name: str, instance_id: str, input_json: str | None
) -> SubOrchestrationCreatedEvent:
    return {
        "EventType": SUB_ORCHESTRATION_INSTANCE_CREATED,
        **_stamp(at, event_id),
        "Name": name,
        "Version": "",
        "InstanceId": instance_id,
        "Input": input_json,
    }


def sub_orchestration_completed(at: datetime, task_id: int, result_json: str | None) -> SubOrchestrationCompletedEvent:
    return {
        "EventType": SUB_ORCHESTRATION_INSTANCE_COMPLETED,
        **_stamp(at),
        "TaskScheduledId": task_id,
        "Result": result_json,
    }


def sub_orchestration_failed(at: datetime, task_id: int, reason: str, details: str) -> SubOrchestrationFailedEvent:
    return {
        "EventType": SUB_ORCHESTRATION_INSTANCE_FAILED,
        **_stamp(at),
        "TaskScheduledId": task_id,
        "Reason": reason,
        "Details": details,
    }


def event_raised(at: datetime, name: str, input_json: str | None) -> EventRaisedEvent:
    return {"EventType": EVENT_RAISED, **_stamp(at), "Name": name, "Input": input_json}


def execution_completed(
    at: datetime, status: str, result_json: str | None, failure: FailureDetails | None = None
) -> ExecutionCompletedEvent:
    return {
        "EventType": EXECUTION_COMPLETED,
        **_stamp(at),
        "OrchestrationStatus": status,
        "Result": result_json,
        "FailureDetails": failure,
    }


def execution_terminated(at: datetime, reason: str) -> ExecutionTerminatedEvent:
    return {"EventType": EXECUTION_TERMINATED, **_stamp(at), "Input": reason}


def execution_suspended(at: datetime, reason: str) -> ExecutionSuspendedEvent:
    return {"EventType": EXECUTION_SUSPENDED, **_stamp(at), "Reason": reason}


def execution_resumed(at: datetime, reason: str) -> ExecutionResumedEvent:
    return {"EventType": EXECUTION_RESUMED, **_stamp(at), "Reason": reason}


def continue_as_new(at: datetime, input_json: str | None) -> ContinueAsNewEvent:
    return {"EventType": CONTINUE_AS_NEW, **_stamp(at), "Result": input_json}
