"""The branches kept for histories written by previous versions, replayed over a recorded one.

``fixtures/previous_version_run.json`` is a whole provisioning run whose activities answered as the
previous versions did (see ``record_previous_version``). Each episode is played again here by today's
orchestrator from the rows before it, as a host does when it picks up an instance after an upgrade;
it must write exactly the rows recorded, and each old-answer branch must decide as that version did.
Deleting a branch fails one of these tests: see DESIGN.md, "Orchestration versioning", for when a
branch may go.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest

from devhost.durable.episode import Execution, Outcome
from devhost.durable.history import EventType, Record, parse_timestamp
from orchestrations.provisioning import FIRST_JOB_CHECK_SECONDS
from orchestrations.provisioning_client import RUNNER_JOB_FINISHED
from tests.orchestrations.engine_history import Engine, from_json, load_fixture, to_json
from tests.orchestrations.record_previous_version import FIXTURE

HISTORY = load_fixture(FIXTURE)
EPISODES: list[dict[str, Any]] = HISTORY["episodes"]
EXECUTION = Execution(HISTORY["execution"]["instance_id"], HISTORY["execution"]["execution_id"], "provisioning_run")


def replayed(orchestrators: Any, index: int) -> Outcome:
    """Episode ``index`` played again by today's orchestrator over the recorded rows before it."""
    committed = [record for episode in EPISODES[:index] for record in from_json(episode["wrote"])]
    episode = EPISODES[index]
    engine = Engine(orchestrators.provisioning_run, EXECUTION)
    return asyncio.run(engine.episode(committed, from_json(episode["incoming"]), parse_timestamp(episode["at"])))


def written(orchestrators: Any, index: int) -> list[Record]:
    committed = sum(len(episode["wrote"]) for episode in EPISODES[:index])
    return replayed(orchestrators, index).records[committed:]


def scheduled(records: list[Record]) -> list[tuple[str, dict[str, Any]]]:
    return [(r.event["Name"], json.loads(r.event["Input"])) for r in records if r.type == EventType.TASK_SCHEDULED]


def timers(records: list[Record]) -> list[str]:
    return [r.event["FireAt"] for r in records if r.type == EventType.TIMER_CREATED]


def answer(index: int) -> Any:
    """What the activity answered in episode ``index`` (its one incoming completion)."""
    return json.loads(EPISODES[index]["incoming"][0]["event"]["Result"])


def test_the_fixture_holds_the_previous_versions_answers():
    """A re-recording with today's answers would test nothing: the old shapes are checked here."""
    assert answer(1) == "proceed"  # the claim alone, no plan_job
    for ticket in (answer(2), answer(7)):
        assert "wait_seconds" not in ticket and "notice" not in ticket
    assert "apply_job" not in answer(6) and answer(6)["requires_approval"] is False
    assert "finished" not in answer(9)


@pytest.mark.parametrize("index", range(len(EPISODES)), ids=[episode["note"] for episode in EPISODES])
def test_every_episode_replays_to_the_rows_it_wrote(orchestrators, index: int):
    outcome = replayed(orchestrators, index)
    committed = sum(len(episode["wrote"]) for episode in EPISODES[:index])
    assert outcome.status == EPISODES[index]["status"], outcome.failure
    assert to_json(outcome.records[committed:]) == EPISODES[index]["wrote"]


def test_the_whole_run_ends_as_it_did(orchestrators):
    outcome = replayed(orchestrators, len(EPISODES) - 1)
    assert outcome.status == "Completed"
    assert json.loads(outcome.output or "null") == {"outcome": "applied", "reason": None, "detail": ""}


def test_a_bare_string_claim_starts_the_plan_job_with_its_own_step(orchestrators):
    names = scheduled(written(orchestrators, 1))
    assert [(name, request["kind"]) for name, request in names] == [("provisioning_start_job", "plan")]


def test_a_ticket_without_wait_seconds_waits_on_a_timer_before_the_first_check(orchestrators):
    records = written(orchestrators, 2)
    fire_at = parse_timestamp(EPISODES[2]["at"]) + timedelta(seconds=FIRST_JOB_CHECK_SECONDS)
    assert scheduled(records) == []  # a new ticket's step is called at once (waiting in the step)
    assert [parse_timestamp(at) for at in timers(records)] == [fire_at]


def test_a_ticket_without_a_notice_is_woken_by_the_shared_notice_every_round(orchestrators):
    assert EPISODES[3]["incoming"][0]["event"]["Name"] == RUNNER_JOB_FINISHED
    assert [name for name, _ in scheduled(written(orchestrators, 3))] == ["provisioning_plan"]
    # A later round is woken again by the shared name, even another job's (a named ticket's would not be).
    assert [name for name, _ in scheduled(written(orchestrators, 5))] == ["provisioning_plan"]


def test_a_plan_answer_without_apply_job_starts_the_apply_job_with_its_own_step(orchestrators):
    names = scheduled(written(orchestrators, 6))
    assert [(name, request["kind"]) for name, request in names] == [("provisioning_start_job", "apply")]


def test_an_apply_answer_without_finished_ends_the_run_with_the_finish_step(orchestrators):
    names = scheduled(written(orchestrators, 9))
    assert [(name, request["outcome"]) for name, request in names] == [("provisioning_finish", "applied")]
