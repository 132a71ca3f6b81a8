"""Replays of a run whose plan job was handed its apply (one job start), and of histories written before it.

The handover changes no step of the orchestration: the plan step answers ``apply_job`` as it did when it
queued the apply, now a ticket of the apply handed to the waiting plan job's execution. So the new order
and an old history replay through the same decisions; what differs is each ticket's notice, and a handed
apply that dies is launched again through the queue (a new attempt, the journal skipping what was done).
"""

from __future__ import annotations

from datetime import timedelta

from orchestrations.provisioning_client import RUNNER_JOB_FINISHED
from shared.provisioning.runner_jobs import notice_event
from tests.orchestrations.test_provisioning_run_decisions import APPLY_JOB, RUN, claimed
from tests.support.orchestrator_replay import Call, OrchestratorReplay, Timer, WaitFor


def ticket(kind: str, attempt: int = 1, *, hands_over: bool = False, named: bool = True) -> dict:
    job_id = f"run-1-{kind}-{attempt}"
    document = {"job_id": job_id, "kind": kind, "attempt": attempt, "check_seconds": 30, "max_attempts": 2}
    if named:  # a ticket from before per-attempt notices has no name: its wait is for the shared one
        document["notice"] = notice_event(job_id)
    if hands_over:
        document["hands_over"] = True
    return document


def planned_with(apply_ticket: dict) -> dict:
    return {"outcome": "planned", "plan_digest": "sha256:plan", "requires_approval": False, "apply_job": apply_ticket}


def plan_job_finished(replay: OrchestratorReplay, plan_ticket: dict) -> None:
    """The claim started ``plan_ticket``; its notice came and the plan step is due."""
    claimed(replay, {"claim": "proceed", "plan_job": plan_ticket})
    replay.decide()
    replay.raise_event(plan_ticket.get("notice") or RUNNER_JOB_FINISHED, {"job_id": plan_ticket["job_id"]})
    assert replay.decide().new == [Call("provisioning_plan", {**RUN, "job": plan_ticket})]


def test_a_handed_over_apply_is_waited_for_on_its_own_notice_then_collected_with_no_launch_step(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    plan_ticket, handed = ticket("plan", hands_over=True), ticket("apply")
    plan_job_finished(replay, plan_ticket)
    replay.complete("provisioning_plan", planned_with(handed))

    applying = replay.decide()
    assert applying.new == [WaitFor(notice_event("run-1-apply-1")), Timer(replay.now + timedelta(seconds=0.25))]
    assert applying.calls == [] and applying.custom_status == "applying"  # no provisioning_start_job
    replay.raise_event(notice_event("run-1-plan-1"), {"job_id": "run-1-plan-1"})  # the plan's again: not this wait
    assert replay.decide().new == []
    replay.raise_event(notice_event("run-1-apply-1"), {"job_id": "run-1-apply-1"})
    assert replay.decide().new == [Call("provisioning_apply", {**RUN, "job": handed})]
    replay.complete("provisioning_apply", {"outcome": "applied", "finished": True, "waiting_runs": []})
    assert replay.decide().done is True


def test_a_handed_over_apply_whose_execution_died_is_launched_again_through_the_queue(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    plan_ticket, handed = ticket("plan", hands_over=True), ticket("apply")
    plan_job_finished(replay, plan_ticket)
    replay.complete("provisioning_plan", planned_with(handed))
    replay.decide()
    replay.fire_timer()
    assert replay.decide().new == [Call("provisioning_apply", {**RUN, "job": handed})]

    replay.complete("provisioning_apply", {"outcome": "waiting", "job_state": "dead", "detail": "no heartbeat"})

    assert replay.decide().new == [Call("provisioning_start_job", {**APPLY_JOB, "attempt": 2})]


def test_a_history_from_before_the_handover_replays_its_queued_apply_job(orchestrators):
    # Written before per-attempt notices and the handover: no ticket names a notice or hands over.
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    plan_ticket, queued = ticket("plan", named=False), ticket("apply", named=False)
    plan_job_finished(replay, plan_ticket)
    replay.complete("provisioning_plan", planned_with(queued))

    applying = replay.decide()
    assert applying.new == [WaitFor(RUNNER_JOB_FINISHED), Timer(replay.now + timedelta(seconds=0.25))]
    replay.raise_event(RUNNER_JOB_FINISHED, {"job_id": "run-1-apply-1"})
    assert replay.decide().new == [Call("provisioning_apply", {**RUN, "job": queued})]


def test_a_run_waiting_for_a_person_keeps_its_two_jobs(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    plan_job_finished(replay, ticket("plan"))  # launched without hands_over: its class needs an approval
    replay.complete(
        "provisioning_plan", {"outcome": "planned", "plan_digest": "sha256:plan", "requires_approval": True}
    )
    assert replay.decide().new == [Call("provisioning_await_approval", RUN)]
