"""The actions an orchestrator episode returns, flattened into the tasks they schedule.

With replay schema V2 the SDK returns every action it has scheduled so far, in
the order it scheduled them, with ``task_all`` / ``task_any`` as compound
actions around their children. Flattened, that order is the order in which the
SDK numbered its tasks, which is what lets the engine give each scheduled task
the same id the SDK expects in its completion event.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Required, TypedDict

from devhost.json_value import JsonValue


class ActionType(IntEnum):
    CALL_ACTIVITY = 0
    CALL_ACTIVITY_WITH_RETRY = 1
    CALL_SUB_ORCHESTRATOR = 2
    CALL_SUB_ORCHESTRATOR_WITH_RETRY = 3
    CONTINUE_AS_NEW = 4
    CREATE_TIMER = 5
    WAIT_FOR_EXTERNAL_EVENT = 6
    CALL_ENTITY = 7
    CALL_HTTP = 8
    SIGNAL_ENTITY = 9
    WHEN_ANY = 11
    WHEN_ALL = 12


ACTIVITIES = {ActionType.CALL_ACTIVITY, ActionType.CALL_ACTIVITY_WITH_RETRY}
SUB_ORCHESTRATIONS = {ActionType.CALL_SUB_ORCHESTRATOR, ActionType.CALL_SUB_ORCHESTRATOR_WITH_RETRY}
# Actions that take a task id (an EventId in history) when scheduled.
NUMBERED = ACTIVITIES | SUB_ORCHESTRATIONS | {ActionType.CREATE_TIMER}
UNSUPPORTED = {ActionType.CALL_ENTITY, ActionType.SIGNAL_ENTITY, ActionType.CALL_HTTP}
_UNSUPPORTED_NAMES = {
    ActionType.CALL_ENTITY: "call_entity",
    ActionType.SIGNAL_ENTITY: "signal_entity",
    ActionType.CALL_HTTP: "call_http",
}


class RetryOptionsJson(TypedDict, total=False):
    maxNumberOfAttempts: int
    firstRetryIntervalInMilliseconds: int


class ActionJson(TypedDict, total=False):
    """One action as the SDK writes it in the orchestrator state; which members it has depends on its type."""

    actionType: Required[int]
    functionName: str
    input: JsonValue  # the SDK's JSON text of the input (anything else is not read)
    fireAt: str
    instanceId: str | None
    retryOptions: RetryOptionsJson | None
    compoundActions: list[ActionJson]  # task_all / task_any: their children


class OrchestratorState(TypedDict, total=False):
    """What the SDK's orchestrator handle returns (its ``OrchestratorState`` as JSON)."""

    isDone: bool
    actions: list[list[ActionJson] | ActionJson]  # schema V2: one group per episode (V1: single actions)
    output: JsonValue  # the orchestrator's return value: the user's
    error: str | None
    customStatus: JsonValue  # the user's
    schemaVersion: int


class UnsupportedAction(Exception):
    """The orchestrator used an API the local engine does not run (entities, durable HTTP)."""


@dataclass(frozen=True)
class Action:
    """One scheduled task as the orchestrator asked for it."""

    type: ActionType
    raw: ActionJson

    @property
    def name(self) -> str:
        return str(self.raw.get("functionName") or "")

    @property
    def input(self) -> str | None:
        value = self.raw.get("input")
        return value if value is None or isinstance(value, str) else None

    @property
    def fire_at(self) -> str:
        return str(self.raw["fireAt"])

    @property
    def instance_id(self) -> str | None:
        return self.raw.get("instanceId") or None

    @property
    def max_attempts(self) -> int:
        options = self.raw.get("retryOptions") or RetryOptionsJson()
        return int(options.get("maxNumberOfAttempts", 1))

    @property
    def retry_interval_ms(self) -> int:
        options = self.raw.get("retryOptions") or RetryOptionsJson()
        return int(options.get("firstRetryIntervalInMilliseconds", 0))

    @property
    def with_retry(self) -> bool:
        return self.type in (ActionType.CALL_ACTIVITY_WITH_RETRY, ActionType.CALL_SUB_ORCHESTRATOR_WITH_RETRY)

    def describe(self) -> str:
        if self.type in ACTIVITIES:
            return f"activity '{self.name}'"
        if self.type in SUB_ORCHESTRATIONS:
            return f"sub-orchestration '{self.name}'"
        if self.type == ActionType.CREATE_TIMER:
            return "a timer"
        return self.type.name.lower()


def flatten(state: OrchestratorState) -> list[Action]:
    """Every action of an orchestrator state (``actions`` of schema V1 or V2), leaves only, in order."""
    leaves: list[Action] = []
    for group in state.get("actions") or []:
        for action in group if isinstance(group, list) else [group]:
            _collect(action, leaves)
    return leaves


def _collect(action: ActionJson, leaves: list[Action]) -> None:
    kind = ActionType(int(action["actionType"]))
    if kind in (ActionType.WHEN_ALL, ActionType.WHEN_ANY):
        for child in action.get("compoundActions") or []:
            _collect(child, leaves)
        return
    leaves.append(Action(kind, action))


def numbered(actions: list[Action]) -> list[Action]:
    """The actions that took a task id, in id order (timers, activities, sub-orchestrations)."""
    return [action for action in actions if action.type in NUMBERED]


def check_supported(actions: list[Action]) -> None:
    for action in actions:
        if action.type in UNSUPPORTED:
            raise UnsupportedAction(
                f"{_UNSUPPORTED_NAMES[action.type]} is not supported by the local Durable engine "
                "(entities and durable HTTP calls run only in Azure)"
            )


def continue_as_new_input(actions: list[Action]) -> tuple[bool, str | None]:
    for action in actions:
        if action.type == ActionType.CONTINUE_AS_NEW:
            return True, action.input
    return False, None
