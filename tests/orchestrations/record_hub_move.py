"""Write ``fixtures/hub_move_history.json``: ``python -m tests.orchestrations.record_hub_move``.

The local engine plays the provisioning run episode by episode (claim with the
plan job, the plan step launching the apply job, three timer checks of a job
still running); then two hosts play the next episode from the same committed
history: host A with the check timer alone (its rows are written, never
committed), host B with the timer and the job's notice that came meanwhile
(the rows that count). The episode after them completes the apply.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from typing import Any

from devhost.durable import history as h
from devhost.durable.episode import Execution
from devhost.durable.history import EventType, Record
from shared.provisioning.runner_jobs import notice_event
from tests.orchestrations import conftest
from tests.orchestrations.engine_history import FIXTURES, Engine, to_json

RUN = {"tenant": "tenant-a", "environment": "dev-1", "run_id": "run-1", "recheck_seconds": 2}
T0 = h.parse_timestamp("2026-12-01T10:00:00.000000Z")
RUNNING = {"outcome": "waiting", "job_state": "running", "detail": "heartbeat 1 s ago"}


def ticket(kind: str, digest: str) -> dict[str, Any]:
    job_id = f"run-1-{kind}-1"
    return {
        "job_id": job_id,
        "kind": kind,
        "attempt": 1,
        "check_seconds": 30,
        "max_attempts": 2,
        "wait_seconds": 2.0,
        "input_sha256": digest * 64,
        "notice": notice_event(job_id),
    }


class Messages:
    def __init__(self) -> None:
        self._count = 0

    def _id(self) -> str:
        self._count += 1
        return f"msg-{self._count}"

    def completed(self, scheduled: Record, value: Any, at: datetime) -> Record:
        return Record(h.task_completed(at, scheduled.event_id, json.dumps(value)), message_id=self._id())

    def fired(self, timer: Record) -> Record:
        fire_at = h.parse_timestamp(timer.event["FireAt"])
        return Record(h.timer_fired(fire_at, timer.event_id, timer.event["FireAt"]), message_id=self._id())

    def raised(self, name: str, value: Any, at: datetime) -> Record:
        return Record(h.event_raised(at, name, json.dumps(value)), message_id=self._id())

    def started(self) -> Record:
        event = h.execution_started(T0, "run-1", "exec-1", "provisioning_run", json.dumps(RUN))
        return Record(event, message_id=self._id())


def last(records: list[Record], event_type: int, name: str | None = None) -> Record:
    return [r for r in records if r.type == event_type and (name is None or r.event.get("Name") == name)][-1]


async def record() -> dict[str, Any]:
    handle = conftest._handle(conftest._PROVISIONING.provisioning_run)
    engine = Engine(handle, Execution("run-1", "exec-1", "provisioning_run"))
    messages, at = Messages(), T0
    plan, apply = ticket("plan", "a"), ticket("apply", "b")
    records = (await engine.episode([], [messages.started()], at)).records

    async def complete(name: str, value: Any) -> list[Record]:
        nonlocal at
        at += timedelta(seconds=1)
        answer = messages.completed(last(records, EventType.TASK_SCHEDULED, name), value, at)
        return (await engine.episode(records, [answer], at)).records

    records = await complete("provisioning_claim_environment", {"claim": "proceed", "plan_job": plan})
    planned = {"outcome": "planned", "plan_digest": "sha256:p", "requires_approval": False, "apply_job": apply}
    records = await complete("provisioning_plan", planned)
    records = await complete("provisioning_apply", RUNNING)  # the step's own wait at the launch
    for _ in range(3):
        fired = messages.fired(last(records, EventType.TIMER_CREATED))
        at = h.parse_timestamp(fired.event["FireAt"])
        records = (await engine.episode(records, [fired], at)).records
        records = await complete("provisioning_apply", RUNNING)
    fired = messages.fired(last(records, EventType.TIMER_CREATED))
    at = h.parse_timestamp(fired.event["FireAt"])
    lost = await engine.episode(records, [fired], at)  # host A: written, never committed
    notice = messages.raised(apply["notice"], {"job_id": apply["job_id"]}, at + timedelta(milliseconds=5))
    replacing = await engine.episode(records, [notice, fired], at + timedelta(milliseconds=10))  # host B
    applied = {"outcome": "applied", "reason": None, "detail": "", "finished": True, "waiting_runs": []}
    scheduled = last(replacing.records, EventType.TASK_SCHEDULED, "provisioning_apply")
    following = messages.completed(scheduled, applied, at + timedelta(seconds=1))
    return {
        "about": "A run's history when its task hub's lease moved A -> B -> A in the middle of an apply check "
        "(issue 30): host A played an episode and wrote its rows but never committed it; host B played the same "
        "timer with the job's notice in its place, writing the same row keys; the next episode follows. "
        "Written by python -m tests.orchestrations.record_hub_move.",
        "committed": to_json(records),
        "lost": to_json(lost.records[len(records) :]),
        "replacing": to_json(replacing.records[len(records) :]),
        "next": to_json([following]),
    }


if __name__ == "__main__":
    document = asyncio.run(record())
    (FIXTURES / "hub_move_history.json").write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
