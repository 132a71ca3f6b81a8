"""Write ``fixtures/previous_version_run.json``: ``python -m tests.orchestrations.record_previous_version``.

A run whose every activity answered as the previous versions of the product answered (before the
claim started the plan, before tickets carried ``wait_seconds`` and a ``notice`` of their own, before
the plan step launched the apply and the apply step finished the run), played episode by episode by
the local Durable engine over the orchestrator, from its start to its end. Each episode is saved with
the events that came in and the rows the engine wrote, so a test can play any episode again from the
rows before it (the way a host replays an instance after an upgrade) and compare.

Durable replays a history by the names and the order of what it scheduled, never by inputs: the rows
are what the previous version wrote for these answers, whichever version decided them. The episodes:

1. started: the claim is scheduled;
2. the claim answers a bare string (``"proceed"``): the plan job is started by its own step;
3. ``provisioning_start_job`` answers a ticket with neither ``wait_seconds`` nor ``notice``: a timer
   first (the timer-first order), waiting for the shared ``RunnerJobFinished`` notice;
4. that notice: the plan step is called; 5. it answers ``waiting``;
6. the shared notice again (another job's: an old ticket cannot tell): the plan step again;
7. it answers planned, no approval, without ``apply_job``: the apply job is started by its own step;
8. its ticket, as old as the plan's: a timer first; 9. the timer fires: the apply step;
10. it answers ``applied`` without ``finished``: ``provisioning_finish`` ends the run;
11. it answers a run waiting behind this one: ``provisioning_wake_runs``;
12. it answers: the orchestration completes.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

from devhost.durable import history as h
from devhost.durable.episode import Execution
from devhost.durable.history import EventType, Record
from orchestrations.provisioning_client import RUNNER_JOB_FINISHED
from tests.orchestrations import conftest
from tests.orchestrations.engine_history import FIXTURES, Engine, to_json
from tests.orchestrations.record_hub_move import T0, Messages, last

FIXTURE = "previous_version_run.json"
EXECUTION = Execution("run-1", "exec-1", "provisioning_run")


def old_ticket(kind: str) -> dict[str, Any]:
    """A ticket as the previous versions answered it: no ``wait_seconds``, no ``notice``, no digest."""
    return {"job_id": f"run-1-{kind}-1", "kind": kind, "attempt": 1, "check_seconds": 30, "max_attempts": 2}


class Recording:
    def __init__(self) -> None:
        handle = conftest._handle(conftest._PROVISIONING.provisioning_run)
        self.engine = Engine(handle, EXECUTION)
        self.messages = Messages()
        self.at = T0
        self.records: list[Record] = []
        self.episodes: list[dict[str, Any]] = []

    async def play(self, incoming: list[Record], note: str) -> None:
        outcome = await self.engine.episode(self.records, incoming, self.at)
        self.episodes.append(
            {
                "note": note,
                "at": h.timestamp(self.at),
                "incoming": to_json(incoming),
                "wrote": to_json(outcome.records[len(self.records) :]),
                "status": outcome.status,
                "output": outcome.output,
            }
        )
        self.records = outcome.records

    async def complete(self, name: str, value: Any, note: str) -> None:
        self.at += timedelta(seconds=1)
        await self.play(
            [self.messages.completed(last(self.records, EventType.TASK_SCHEDULED, name), value, self.at)], note
        )

    async def notice(self, job_id: str, note: str) -> None:
        self.at += timedelta(milliseconds=100)
        await self.play([self.messages.raised(RUNNER_JOB_FINISHED, {"job_id": job_id}, self.at)], note)

    async def timer(self, note: str) -> None:
        fired = self.messages.fired(last(self.records, EventType.TIMER_CREATED))
        self.at = max(self.at, h.parse_timestamp(fired.event["FireAt"]))
        await self.play([fired], note)


async def record() -> dict[str, Any]:
    run = Recording()
    waiting = {"outcome": "waiting", "job_state": "running", "detail": "heartbeat 1 s ago"}
    await run.play([run.messages.started()], "started: the claim is scheduled")
    await run.complete("provisioning_claim_environment", "proceed", "a bare claim: the plan job's own start")
    await run.complete("provisioning_start_job", old_ticket("plan"), "an old ticket: a timer first")
    await run.notice("run-1-plan-1", "the shared notice: the plan step")
    await run.complete("provisioning_plan", waiting, "still running: the next wait")
    await run.notice("run-1-other-1", "the shared notice again: the plan step again")
    planned = {"outcome": "planned", "plan_digest": "sha256:plan", "requires_approval": False}
    await run.complete("provisioning_plan", planned, "planned without apply_job: the apply job's own start")
    await run.complete("provisioning_start_job", old_ticket("apply"), "an old ticket: a timer first")
    await run.timer("the timer: the apply step")
    applied = {"outcome": "applied", "reason": None, "detail": ""}
    await run.complete("provisioning_apply", applied, "applied without finished: the finish step")
    await run.complete("provisioning_finish", ["run-2"], "a run waits behind: it is woken")
    await run.complete("provisioning_wake_runs", 1, "the run completes")
    return {
        "about": "A provisioning run whose every activity answered as the previous versions did (no plan_job in the "
        "claim, tickets without wait_seconds or notice, no apply_job, no finished), played by the local engine "
        "episode by episode. Written by python -m tests.orchestrations.record_previous_version.",
        "execution": {"instance_id": EXECUTION.instance_id, "execution_id": EXECUTION.execution_id},
        "episodes": run.episodes,
    }


if __name__ == "__main__":
    document = asyncio.run(record())
    (FIXTURES / FIXTURE).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
