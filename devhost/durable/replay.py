"""One orchestrator episode through the SDK's own handle.

The handle that ``DFApp.orchestration_trigger`` registers takes the
orchestration context JSON (history, instance id, input, replay schema) and
returns the orchestrator state JSON; when the orchestrator raised, the handle
raises an exception whose message carries that state after
``$OutOfProcData$:``, exactly as the Python worker reports it to the Functions
host. This module builds the one and reads the other.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import azure.functions as func

from devhost.durable.actions import OrchestratorState
from devhost.durable.history import ORCHESTRATOR_STARTED, FailureDetails, HistoryEvent, Record
from devhost.json_value import JsonValue

OUT_OF_PROC_MARKER = "\n\n$OutOfProcData$:"
# Replay schema V2 (one cumulative action list with compound actions); the SDK
# reads V3 from ``upperSchemaVersionNew`` but only uses it for long timers,
# which need the timer-length settings this host does not send.
UPPER_SCHEMA_VERSION = 1
UPPER_SCHEMA_VERSION_NEW = 2


@dataclass(frozen=True)
class OrchestratorError:
    error_type: str
    message: str

    def failure_details(self) -> FailureDetails:
        return {"ErrorType": self.error_type, "ErrorMessage": self.message}


@dataclass
class OrchestratorResult:
    """The state the orchestrator returned: its actions, and whether and how it finished."""

    state: OrchestratorState = field(default_factory=OrchestratorState)
    error: OrchestratorError | None = None

    @property
    def done(self) -> bool:
        return bool(self.state.get("isDone"))

    @property
    def output(self) -> JsonValue:
        return self.state.get("output")

    @property
    def custom_status(self) -> JsonValue:
        return self.state.get("customStatus")


def context_json(
    instance_id: str, parent_instance_id: str | None, input_json: str | None, history: list[Record], replayed_count: int
) -> str:
    """The orchestration trigger's value: events before ``replayed_count`` are marked as played."""
    events: list[HistoryEvent] = []
    for index, record in enumerate(history):
        event = record.event.copy()
        event["IsPlayed"] = index < replayed_count and event["EventType"] != ORCHESTRATOR_STARTED
        events.append(event)
    return json.dumps(
        {
            "history": events,
            "instanceId": instance_id,
            "isReplaying": replayed_count > 0,
            "parentInstanceId": parent_instance_id,
            "input": input_json,
            "upperSchemaVersion": UPPER_SCHEMA_VERSION,
            "upperSchemaVersionNew": UPPER_SCHEMA_VERSION_NEW,
        }
    )


def run_handle(handle: Callable[[func.OrchestrationContext], object], context: str) -> OrchestratorResult:
    """Call the SDK's orchestrator handle as the Python worker does and read what it says."""
    try:
        returned = handle(func.OrchestrationContext(context))
    except Exception as error:  # noqa: BLE001 - the orchestrator (or the SDK on its behalf) raised
        return _failed(error)
    if isinstance(returned, (bytes, bytearray)):
        returned = returned.decode("utf-8")
    if not isinstance(returned, str):
        return OrchestratorResult(
            {},
            OrchestratorError(
                "TypeError",
                "the orchestrator function did not return the SDK's orchestrator state; "
                "is it registered with DFApp.orchestration_trigger?",
            ),
        )
    return OrchestratorResult(json.loads(returned))


def _failed(error: Exception) -> OrchestratorResult:
    text = str(error)
    head, marker, data = text.partition(OUT_OF_PROC_MARKER)
    cause = error.__cause__ if marker and error.__cause__ is not None else error
    state: OrchestratorState = {}
    if marker:
        try:
            state = json.loads(data)
        except json.JSONDecodeError:
            state = {}
    message = head if marker else text
    return OrchestratorResult(state, OrchestratorError(type(cause).__name__, message or type(cause).__name__))
