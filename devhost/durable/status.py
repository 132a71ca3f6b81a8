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
from typing import Any

from devhost.durable.history import EventType, Record
from devhost.durable.instances import InstanceState, RuntimeStatus

_HIDDEN = {
    EventType.ORCHESTRATOR_STARTED,
    EventType.ORCHESTRATOR_COMPLETED,
    EventType.TASK_SCHEDULED,
    EventType.SUB_ORCHESTRATION_INSTANCE_CREATED,
}


def api_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def json_value(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def status_document(
    state: InstanceState,
    show_input: bool = True,
    history: list[Record] | None = None,
    show_history_output: bool = False,
) -> dict[str, Any]:
    status = RuntimeStatus.RUNNING if state.status == RuntimeStatus.CONTINUED_AS_NEW else state.status
    document: dict[str, Any] = {
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
            "errorType": state.failure.get("ErrorType"),
            "errorMessage": state.failure.get("ErrorMessage"),
        }
    if history is not None:
        document["historyEvents"] = history_document(history, show_history_output)
    return document


def history_document(records: list[Record], show_output: bool) -> list[dict[str, Any]]:
    scheduled = {
        r.event_id: r.event
        for r in records
        if r.type in (EventType.TASK_SCHEDULED, EventType.SUB_ORCHESTRATION_INSTANCE_CREATED)
    }
    listed = []
    for record in records:
        if record.type in _HIDDEN:
            continue
        listed.append(_history_entry(record, scheduled, show_output))
    return listed


def _history_entry(record: Record, scheduled: dict[int, dict[str, Any]], show_output: bool) -> dict[str, Any]:
    event = record.event
    entry: dict[str, Any] = {"EventType": _type_name(record.type), "Timestamp": event.get("Timestamp")}
    task = record.completes()
    if task is not None and record.type != EventType.TIMER_FIRED:
        origin = scheduled.get(task, {})
        entry.update(FunctionName=origin.get("Name"), ScheduledTime=origin.get("Timestamp"), TaskScheduledId=task)
        if "InstanceId" in origin:
            entry["InstanceId"] = origin["InstanceId"]
    if record.type == EventType.EXECUTION_STARTED:
        entry["FunctionName"] = event.get("Name")
        if show_output:
            entry["Input"] = json_value(event.get("Input"))
    elif record.type in (EventType.TASK_COMPLETED, EventType.SUB_ORCHESTRATION_INSTANCE_COMPLETED):
        if show_output:
            entry["Result"] = json_value(event.get("Result"))
    elif record.type in (EventType.TASK_FAILED, EventType.SUB_ORCHESTRATION_INSTANCE_FAILED):
        entry.update(Reason=event.get("Reason"), Details=event.get("Details"))
    elif record.type in (EventType.TIMER_CREATED, EventType.TIMER_FIRED):
        entry.update(FireAt=event.get("FireAt"), TimerId=event.get("TimerId", record.event_id))
    elif record.type == EventType.EVENT_RAISED:
        entry["Name"] = event.get("Name")
        if show_output:
            entry["Input"] = json_value(event.get("Input"))
    elif record.type == EventType.EXECUTION_COMPLETED:
        entry["OrchestrationStatus"] = event.get("OrchestrationStatus")
        if show_output:
            entry["Result"] = json_value(event.get("Result"))
    elif record.type == EventType.EXECUTION_TERMINATED:
        entry["Input"] = event.get("Input")
    elif record.type in (EventType.EXECUTION_SUSPENDED, EventType.EXECUTION_RESUMED):
        entry["Reason"] = event.get("Reason")
    return entry


def _type_name(event_type: int) -> str:
    return "".join(part.title() for part in EventType(event_type).name.split("_"))
