"""The episode logic on its own, driven through the SDK's orchestrator handle without a host.

A small simulator plays the part of the queues: it turns every task the
engine schedules into its result (or failure) and delivers them in random
batches and orders. Whatever the order, the SDK must find each result under
the task id it expects, or the orchestration would hang or misbehave.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import azure.durable_functions as df
import pytest
from azure.durable_functions.orchestrator import Orchestrator

from devhost.durable import history as h
from devhost.durable.episode import Execution, Outcome, play
from devhost.durable.history import EventType, Record
from devhost.durable.replay import context_json, run_handle

# activity name -> how many times it fails before it succeeds
FAILURES = {"flaky_a": 2, "flaky_b": 1, "steady": 0, "broken": 99}


def retry(attempts: int) -> df.RetryOptions:
    return df.RetryOptions(first_retry_interval_in_milliseconds=10, max_number_of_attempts=attempts)


def mixed(context: df.DurableOrchestrationContext):
    """Retries interleaved with plain tasks and a timer, then more work after."""
    tasks = [
        context.call_activity_with_retry("flaky_a", retry(4), 1),
        context.call_activity("steady", 2),
        context.call_activity_with_retry("flaky_b", retry(3), 3),
        context.create_timer(context.current_utc_datetime + timedelta(seconds=1)),
    ]
    first = yield context.task_all(tasks)
    second = yield context.call_activity_with_retry("flaky_b", retry(3), 4)
    try:
        yield context.call_activity_with_retry("broken", retry(2), 5)
    except Exception as error:  # past its retries: the orchestrator sees the activity's error
        broken = str(error).split("\n")[0].strip()
    race = yield context.task_any([context.call_activity("steady", 6), context.call_activity("steady", 7)])
    return {"first": first[:3], "second": second, "broken": broken, "race": race.result in ("steady:6", "steady:7")}


def racing(context: df.DurableOrchestrationContext):
    """A retried task still running while the orchestrator moves on: their ids interleave."""
    slow = context.call_activity_with_retry("flaky_a", retry(4), 1)
    winner = yield context.task_any([slow, context.call_activity("steady", 2)])
    after = yield context.task_all(
        [context.call_activity("steady", 3), context.call_activity_with_retry("flaky_b", retry(3), 4)]
    )
    rest = yield slow
    return [winner.result, after, rest]


def fan_out(context: df.DurableOrchestrationContext):
    results = yield context.task_all([context.call_activity_with_retry("flaky_a", retry(3), n) for n in range(6)])
    return sorted(results)


class Simulator:
    """Results for scheduled tasks, delivered in random batches."""

    def __init__(self, orchestrator: Callable[..., Any], seed: int) -> None:
        self._handle = Orchestrator.create(orchestrator)
        self._random = random.Random(seed)
        self._attempts: dict[Any, int] = {}
        self.execution = Execution("instance", "execution", orchestrator.__name__)
        self.ran_activities: list[str] = []

    async def run(self, input_value: Any = None, max_episodes: int = 200) -> Outcome:
        start = h.execution_started(h.now(), "instance", "execution", self.execution.name, json.dumps(input_value))
        records: list[Record] = []
        incoming = [Record(start)]
        waiting: list[Record] = []
        for _ in range(max_episodes):
            before = len(records)
            outcome = await play(self.execution, records, incoming, False, self._run, h.now())
            records = outcome.records
            if outcome.status != "Running":
                return outcome
            waiting += [self._result(r) for r in records[before:] if r.type in h.SCHEDULING]
            self._random.shuffle(waiting)
            count = self._random.randint(1, len(waiting)) if waiting else 0
            incoming, waiting = waiting[:count], waiting[count:]
        raise AssertionError("the orchestration did not finish: a result went unnoticed")

    async def _run(self, history: list[Record], replayed: int):  # type: ignore[no-untyped-def]
        input_json = next(r.event["Input"] for r in history if r.type == EventType.EXECUTION_STARTED)
        return run_handle(self._handle, context_json("instance", None, input_json, history, replayed))

    def _result(self, scheduled: Record) -> Record:
        at = h.now()
        if scheduled.type == EventType.TIMER_CREATED:
            return Record(h.timer_fired(at, scheduled.event_id, scheduled.event["FireAt"]))
        name, value = scheduled.event["Name"], json.loads(scheduled.event["Input"])
        key = (name, value)
        self._attempts[key] = self._attempts.get(key, 0) + 1
        self.ran_activities.append(name)
        if self._attempts[key] <= FAILURES[name]:
            return Record(h.task_failed(at, scheduled.event_id, f"{name} failed", "RuntimeError", "RuntimeError"))
        return Record(h.task_completed(at, scheduled.event_id, json.dumps(f"{name}:{value}")))


@pytest.mark.parametrize("seed", range(12))
def test_retries_interleaved_with_other_tasks_find_their_results_in_any_order(seed: int) -> None:
    simulator = Simulator(mixed, seed)
    outcome = asyncio.run(simulator.run())

    assert outcome.status == "Completed", outcome.output
    assert json.loads(outcome.output or "null") == {
        "first": ["flaky_a:1", "steady:2", "flaky_b:3"],
        "second": "flaky_b:4",
        "broken": "broken failed",
        "race": True,
    }
    assert simulator.ran_activities.count("broken") == 2  # two attempts, as its retry options say


@pytest.mark.parametrize("seed", range(12))
def test_tasks_scheduled_while_a_retry_is_pending_are_numbered_as_the_sdk_numbers_them(seed: int) -> None:
    outcome = asyncio.run(Simulator(racing, seed).run())

    assert outcome.status == "Completed", outcome.output
    result = json.loads(outcome.output or "null")
    assert result[1:] == [["steady:3", "flaky_b:4"], "flaky_a:1"]
    assert result[0] in ("steady:2", "flaky_a:1")


@pytest.mark.parametrize("seed", range(6))
def test_a_fan_out_of_retried_activities_completes_in_any_order(seed: int) -> None:
    simulator = Simulator(fan_out, seed)
    outcome = asyncio.run(simulator.run())

    assert outcome.status == "Completed", outcome.output
    assert json.loads(outcome.output or "null") == sorted(f"flaky_a:{n}" for n in range(6))
    assert simulator.ran_activities.count("flaky_a") == 18  # each: two failures, then success


def test_replaying_a_different_call_is_non_deterministic() -> None:
    calls = iter(["steady", "flaky_b"])

    def changes_its_mind(context: df.DurableOrchestrationContext):
        yield context.call_activity(next(calls), 1)
        return "done"

    outcome = asyncio.run(Simulator(changes_its_mind, 0).run())

    assert outcome.status == "Failed"
    assert outcome.failure is not None
    assert outcome.failure["ErrorType"] == "NonDeterministicOrchestrationException"
    assert "activity 'steady'" in outcome.failure["ErrorMessage"]
    assert "activity 'flaky_b'" in outcome.failure["ErrorMessage"]
