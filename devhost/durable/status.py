"""An instance's status as the Durable HTTP management API shows it.

``input``, ``output`` and ``customStatus`` are JSON values (not the JSON text
they are stored as). With ``showHistory`` the history is listed the way the
API lists it: bookkeeping events (episode markers, the scheduling half of each
task) are folded into the events that complete them, with the function name
and scheduled time.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import NotRequired, TypedDict

from devhost.durable.history import (
    EVENT_RAISED,
    EXECUTION_COMPLETED,
    EXECUTION_RESUMED,
    EXECUTION_STARTED,
    EXECUTION_SUSPENDED,
    EXECUTION_TERMINATED,
    SUB_ORCHESTRATION_INSTANCE_COMPLETED,
    SUB_ORCHESTRATION_INSTANCE_CREATED,
    SUB_ORCHESTRATION_INSTANCE_FAILED,
    TASK_COMPLETED,
    TASK_FAILED,
    TASK_SCHEDULED,
    TIMER_CREATED,
    TIMER_FIRED,
    EventType,
    HistoryEvent,
    Record,
    SubOrchestrationCreatedEvent,
    TaskScheduledEvent,
)
from devhost.durable.instances import InstanceState, RuntimeStatus
from devhost.json_value import JsonValue

_HIDDEN = {
    EventType.ORCHESTRATOR_STARTED,
    EventType.ORCHESTRATOR_COMPLETED,
    EventType.TASK_SCHEDULED,
    EventType.SUB_ORCHESTRATION_INSTANCE_CREATED,
}


class FailureDetailsDocument(TypedDict):
    errorType: str
    errorMessage: str


class HistoryEntry(TypedDict, total=False):
    """One event of ``historyEvents``: which members it has depends on its ``EventType`` (see ``_history_entry``)."""

    EventType: str
    Timestamp: str
    FunctionName: str | None  # None: the task's scheduling event is not in this history
    ScheduledTime: str | None
    TaskScheduledId: int
    InstanceId: str
    Input: JsonValue  # the user's input or event data (a terminate's reason: its text)
    Result: JsonValue  # the user's output or activity result
    Reason: str
    Details: str
    FireAt: str
    TimerId: int
    Name: str
    OrchestrationStatus: str


class StatusDocument(TypedDict):
    """An instance as the status and list endpoints answer it."""

    name: str
    instanceId: str
    runtimeStatus: str
    input: JsonValue
    customStatus: JsonValue
    output: JsonValue
    createdTime: str
    lastUpdatedTime: str
    failureDetails: NotRequired[FailureDetailsDocument]
    historyEvents: NotRequired[list[HistoryEntry]]


def api_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def json_value(text: str | None) -> JsonValue:
    """The JSON value ``text`` holds (text that is not JSON is answered as the string it is)."""
    if text is None:
        return None
    try:
        value: JsonValue = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value


def status_document(
    state: InstanceState,
    show_input: bool = True,
    history: list[Record] | None = None,
    show_history_output: bool = False,
) -> StatusDocument:
    status = RuntimeStatus.RUNNING if state.status == RuntimeStatus.CONTINUED_AS_NEW else state.status
    document: StatusDocument = {
        "name": state.name,
        "instanceId": state.instance_id,
        "runtimeStatus": status.value,
        "input": json_value(state.input) if show_input else None,
        "customStatus": json_value(state.custom_status),
        "output": json_value(state.output),
        "createdTime": api_time(state.created),
        "lastUpdatedTime": api_time(state.updated),
    }
    if state.failure:
        document["failureDetails"] = {
            "errorType": state.failure["ErrorType"],
            "errorMessage": state.failure["ErrorMessage"],
        }
    if history is not None:
        document["historyEvents"] = history_document(history, show_history_output)
    return document


def history_document(records: list[Record], show_output: bool) -> list[HistoryEntry]:
    scheduled: dict[int, TaskScheduledEvent | SubOrchestrationCreatedEvent] = {}
    for record in records:
        if record.event["EventType"] in (TASK_SCHEDULED, SUB_ORCHESTRATION_INSTANCE_CREATED):
            scheduled[record.event_id] = record.event
    listed = []
    for record in records:
        if record.type in _HIDDEN:
            continue
        listed.append(_history_entry(record.event, scheduled, show_output))
    return listed


def _history_entry(
    event: HistoryEvent, scheduled: dict[int, TaskScheduledEvent | SubOrchestrationCreatedEvent], show_output: bool
) -> HistoryEntry:
    entry: HistoryEntry = {"EventType": _type_name(event["EventType"]), "Timestamp": event["Timestamp"]}
    if (
        event["EventType"] == TASK_COMPLETED
        or event["EventType"] == TASK_FAILED
        or event["EventType"] == SUB_ORCHESTRATION_INSTANCE_COMPLETED
        or event["EventType"] == SUB_ORCHESTRATION_INSTANCE_FAILED
    ):  # named after the task it completes
        task = event["TaskScheduledId"]
        origin = scheduled.get(task)
        entry["FunctionName"] = origin["Name"] if origin is not None else None
        entry["ScheduledTime"] = origin["Timestamp"] if origin is not None else None
        entry["TaskScheduledId"] = task
        if origin is not None and origin["EventType"] == SUB_ORCHESTRATION_INSTANCE_CREATED:
            entry["InstanceId"] = origin["InstanceId"]
    if event["EventType"] == EXECUTION_STARTED:
        entry["FunctionName"] = event["Name"]
        if show_output:
            entry["Input"] = json_value(event["Input"])
    elif event["EventType"] == TASK_COMPLETED or event["EventType"] == SUB_ORCHESTRATION_INSTANCE_COMPLETED:
        if show_output:
            entry["Result"] = json_value(event["Result"])
    elif event["EventType"] == TASK_FAILED or event["EventType"] == SUB_ORCHESTRATION_INSTANCE_FAILED:
        entry["Reason"], entry["Details"] = event["Reason"], event["Details"]
    elif event["EventType"] == TIMER_CREATED:
        entry["FireAt"], entry["TimerId"] = event["FireAt"], event["EventId"]
    elif event["EventType"] == TIMER_FIRED:
        entry["FireAt"], entry["TimerId"] = event["FireAt"], event["TimerId"]
    elif event["EventType"] == EVENT_RAISED:
        entry["Name"] = event["Name"]
        if show_output:
            entry["Input"] = json_value(event["Input"])
    elif event["EventType"] == EXECUTION_COMPLETED:
        entry["OrchestrationStatus"] = event["OrchestrationStatus"]
        if show_output:
            entry["Result"] = json_value(event["Result"])
    elif event["EventType"] == EXECUTION_TERMINATED:
        entry["Input"] = event["Input"]
    elif event["EventType"] == EXECUTION_SUSPENDED or event["EventType"] == EXECUTION_RESUMED:
        entry["Reason"] = event["Reason"]
    return entry


def _type_name(event_type: int) -> str:
    return "".join(part.title() for part in EventType(event_type).name.split("_"))
