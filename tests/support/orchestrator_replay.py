"""Drive an orchestrator by replay, in process: no host, no storage, milliseconds per step.

The model is azure-functions-durable-python's own orchestrator tests: build a
history of Durable events (the JSON shapes the Functions host hands the Python
SDK: ``EventType``, ``EventId``, ``TaskScheduledId``, ``TimerId``, ...), call the
handle that ``DFApp.orchestration_trigger`` registered as the worker calls it,
and read the decisions it returns (activities to call, timers, events to wait
for, continue-as-new, its output).

:class:`OrchestratorReplay` keeps that history the way the Durable extension
writes it, one episode at a time:

- :meth:`OrchestratorReplay.decide` runs one episode over the history so far and
  returns what the orchestrator newly asked for (an :class:`Episode`); it then
  records those requests as the extension would (``TaskScheduled`` /
  ``TimerCreated`` with the task id the SDK gave each, then
  ``OrchestratorCompleted``);
- :meth:`complete`, :meth:`fail`, :meth:`fire_timer` and :meth:`raise_event`
  append what "happened" next, in a new episode (``OrchestratorStarted`` at
  the replay's clock, which is what ``context.current_utc_datetime`` reads).

Only the SDK decides; this module writes history and reads actions, so a test
fails when the product's orchestrator decides differently, not when this
helper does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import azure.functions as func
from azure.durable_functions.models.actions.ActionType import ActionType
from azure.durable_functions.models.history.HistoryEventType import HistoryEventType as Event

_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # the SDK's DATETIME_STRING_FORMAT
_NUMBERED = {
    ActionType.CALL_ACTIVITY,
    ActionType.CALL_ACTIVITY_WITH_RETRY,
    ActionType.CALL_SUB_ORCHESTRATOR,
    ActionType.CALL_SUB_ORCHESTRATOR_WITH_RETRY,
    ActionType.CREATE_TIMER,
}
_ACTIVITIES = {ActionType.CALL_ACTIVITY, ActionType.CALL_ACTIVITY_WITH_RETRY}
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def _text(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_FORMAT)


def _parse(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# -- the decisions, as tests compare them ------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """Call an activity (``with_retry`` when the orchestrator passed retry options)."""

    name: str
    input: Any = None
    with_retry: bool = True


@dataclass(frozen=True)
class Timer:
    fire_at: datetime


@dataclass(frozen=True)
class WaitFor:
    event: str


@dataclass(frozen=True)
class ContinueAsNew:
    input: Any


Decision = Call | Timer | WaitFor | ContinueAsNew


@dataclass
class Episode:
    """What one episode of the orchestrator decided."""

    new: list[Decision]
    done: bool
    output: Any
    custom_status: Any
    error: str | None = None

    @property
    def calls(self) -> list[str]:
        return [decision.name for decision in self.new if isinstance(decision, Call)]


def _decision(action: dict[str, Any]) -> Decision:
    kind = ActionType(action["actionType"])
    if kind in _ACTIVITIES:
        raw = action.get("input")
        return Call(
            action["functionName"],
            json.loads(raw) if isinstance(raw, str) else raw,
            with_retry=kind is ActionType.CALL_ACTIVITY_WITH_RETRY,
        )
    if kind is ActionType.CREATE_TIMER:
        return Timer(_parse(action["fireAt"]))
    if kind is ActionType.WAIT_FOR_EXTERNAL_EVENT:
        return WaitFor(action["externalEventName"])
    if kind is ActionType.CONTINUE_AS_NEW:
        raw = action.get("input")
        return ContinueAsNew(json.loads(raw) if isinstance(raw, str) else raw)
    raise AssertionError(f"this replay helper does not know action {kind.name}: {action}")


def _flatten(actions: list[Any]) -> list[dict[str, Any]]:
    """The SDK's cumulative action list (a list per yield; task_any/task_all as lists or compound actions)."""
    flat: list[dict[str, Any]] = []
    for item in actions:
        if isinstance(item, list):
            flat += _flatten(item)
        elif item.get("actionType") in (ActionType.WHEN_ANY, ActionType.WHEN_ALL):
            flat += _flatten(item.get("compoundActions") or [])
        else:
            flat.append(item)
    return flat


# -- the replay -------------------------------------------------------------------------------


@dataclass
class _Pending:
    id: int
    decision: Decision


@dataclass
class OrchestratorReplay:
    """One orchestration instance, replayed through ``handle`` (see the module's notes)."""

    handle: Callable[[func.OrchestrationContext], Any]
    input: Any
    now: datetime = T0
    instance_id: str = "replay-instance"
    history: list[dict[str, Any]] = field(default_factory=list)
    _played: int = 0  # events of earlier episodes (IsPlayed)
    _seen_actions: int = 0
    _action_ids: list[int | None] = field(default_factory=list)  # the task id of each action seen
    _next_id: int = 0
    _pending: list[_Pending] = field(default_factory=list)
    _episode_open: bool = False

    def __post_init__(self) -> None:
        self._begin_episode()
        self._event(Event.EXECUTION_STARTED, Name="orchestrator", Version="", Input=json.dumps(self.input))

    # what happens to the orchestration -------------------------------------------------------

    def decide(self, allow_failure: bool = False) -> Episode:
        """Run one episode over the history so far; record its new requests as the extension would.

        An orchestrator that raises fails the test unless ``allow_failure`` (then see ``Episode.error``).
        """
        context = json.dumps(
            {
                "history": self._marked_history(),
                "instanceId": self.instance_id,
                "isReplaying": self._played > 0,
                "parentInstanceId": None,
                "input": json.dumps(self.input),
            }
        )
        try:
            state = json.loads(self.handle(func.OrchestrationContext(context)))
        except Exception as error:  # the orchestrator raised: the SDK reports its state after a marker
            _, marker, data = str(error).partition("$OutOfProcData$:")
            if not marker:
                raise
            state = json.loads(data)
        actions = _flatten(state.get("actions") or [])
        new = [_decision(action) for action in actions[self._seen_actions :]]
        for action, decision in zip(actions[self._seen_actions :], new, strict=True):
            self._action_ids.append(self._schedule(decision) if ActionType(action["actionType"]) in _NUMBERED else None)
        self._seen_actions = len(actions)
        cancelled = {
            task_id for action, task_id in zip(actions, self._action_ids, strict=True) if action.get("isCanceled")
        }
        self._pending = [p for p in self._pending if p.id not in cancelled]  # a cancelled timer never fires
        self._event(Event.ORCHESTRATOR_COMPLETED)
        self._played = len(self.history)
        self._episode_open = False
        episode = Episode(
            new, bool(state.get("isDone")), state.get("output"), state.get("customStatus"), state.get("error")
        )
        if episode.error and not allow_failure:
            raise AssertionError(f"the orchestrator failed: {episode.error}")
        return episode

    def complete(self, name: str, result: Any) -> None:
        """The pending call of activity ``name`` returned ``result``."""
        pending = self._take(lambda p: isinstance(p.decision, Call) and p.decision.name == name, f"a call of {name}")
        self._begin_episode()
        self._event(Event.TASK_COMPLETED, TaskScheduledId=pending.id, Result=json.dumps(result))

    def fail(self, name: str, attempts: int, reason: str = "the store is down") -> None:
        """Every attempt of the pending call of ``name`` failed (a ``*_with_retry`` call makes ``attempts``).

        As the extension writes it: each failure, then the retry timer the SDK waits on (the last
        timer too: the SDK decides only after it fires), each retry with its own task id.
        """
        pending = self._take(lambda p: isinstance(p.decision, Call) and p.decision.name == name, f"a call of {name}")
        self._begin_episode()
        task_id = pending.id
        for attempt in range(1, attempts + 1):
            self._event(Event.TASK_FAILED, TaskScheduledId=task_id, Reason=reason, Details=reason)
            timer_id, self._next_id = self._next_id, self._next_id + 1
            self._event(Event.TIMER_FIRED, TimerId=timer_id, FireAt=_text(self.now))
            if attempt < attempts:
                task_id, self._next_id = self._next_id, self._next_id + 1

    def fire_timer(self) -> None:
        """The pending timer fired (the replay's clock moves to its time)."""
        pending = self._take(lambda p: isinstance(p.decision, Timer), "a timer")
        assert isinstance(pending.decision, Timer)
        self.now = max(self.now, pending.decision.fire_at)
        self._begin_episode()
        self._event(Event.TIMER_FIRED, TimerId=pending.id, FireAt=_text(pending.decision.fire_at))

    def raise_event(self, name: str, data: Any = None, after: timedelta = timedelta(seconds=1)) -> None:
        """External event ``name`` arrived, ``after`` the last episode."""
        self.now += after
        self._begin_episode()
        self._event(Event.EVENT_RAISED, Name=name, Input=json.dumps(data))

    @property
    def pending(self) -> list[Decision]:
        """The calls and timers the orchestration waits on (a timer it cancelled is not among them)."""
        return [p.decision for p in self._pending]

    # history ---------------------------------------------------------------------------------

    def _schedule(self, decision: Decision) -> int:
        task_id, self._next_id = self._next_id, self._next_id + 1
        if isinstance(decision, Timer):
            self._event(Event.TIMER_CREATED, EventId=task_id, FireAt=_text(decision.fire_at))
        elif isinstance(decision, Call):
            self._event(Event.TASK_SCHEDULED, EventId=task_id, Name=decision.name)
        self._pending.append(_Pending(task_id, decision))
        return task_id

    def _take(self, matches: Callable[[_Pending], bool], what: str) -> _Pending:
        for pending in self._pending:
            if matches(pending):
                self._pending.remove(pending)
                return pending
        raise AssertionError(f"the orchestrator is not waiting for {what}; it waits for {self.pending}")

    def _begin_episode(self) -> None:
        if not self._episode_open:
            self._episode_open = True
            self._event(Event.ORCHESTRATOR_STARTED)

    def _event(self, kind: Event, EventId: int = -1, **fields: Any) -> None:  # the SDK's names
        self.history.append(
            {"EventType": int(kind), "EventId": EventId, "IsPlayed": False, "Timestamp": _text(self.now), **fields}
        )

    def _marked_history(self) -> list[dict[str, Any]]:
        return [{**event, "IsPlayed": index < self._played} for index, event in enumerate(self.history)]
