"""Waits that an early, repeated or stale event cannot cut short, replayed in process.

The Python Durable SDK hands an event that arrived while nothing waited for
its name to every later wait for that name (see ``orchestrations.waits``). Each
test builds the history of such an arrival and checks what the orchestrator
decides: one step call per notice of the job it waits for, checks that back
off on their timer, and wakes taken once.
"""

from __future__ import annotations

from datetime import timedelta

from orchestrations.provisioning import APPROVAL_POLL_FIRST_SECONDS, APPROVAL_POLL_MAX_SECONDS
from orchestrations.provisioning_client import APPROVAL_DECIDED, ENVIRONMENT_CHANGED
from shared.provisioning.runner_jobs import notice_event
from tests.orchestrations.test_provisioning_run_decisions import (
    CLAIM,
    RUN,
    awaiting_approval,
    claimed,
    ticket,
)
from tests.support.orchestrator_replay import Call, OrchestratorReplay, Timer, WaitFor

PLAN_NOTICE, APPLY_NOTICE = notice_event("run-1-plan-1"), notice_event("run-1-apply-1")
PLAN_TICKET = {**ticket("plan", check_seconds=4), "wait_seconds": 2.0, "notice": PLAN_NOTICE}
APPLY_TICKET = {**ticket("apply", check_seconds=4), "notice": APPLY_NOTICE}
RUNNING = {"outcome": "waiting", "job_state": "running", "detail": "heartbeat 1 s ago"}
PLANNED = {"outcome": "planned", "plan_digest": "sha256:plan", "requires_approval": False, "apply_job": APPLY_TICKET}
APPLIED = {"outcome": "applied", "reason": None, "detail": "", "finished": True, "waiting_runs": []}


def plan_notice_came_early(orchestrators) -> OrchestratorReplay:
    """The plan job's notice arrived while the plan step still waited in its activity: nothing waited for it."""
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay, {"claim": "proceed", "plan_job": PLAN_TICKET})
    assert replay.decide().new == [Call("provisioning_plan", {**RUN, "job": PLAN_TICKET, "job_wait_seconds": 2.0})]
    replay.raise_event(PLAN_NOTICE, {"job_id": "run-1-plan-1"})
    replay.complete("provisioning_plan", RUNNING)  # its wait in the activity ended a moment before the job
    return replay


def test_an_early_notice_ends_the_wait_for_its_own_job_once(orchestrators):
    replay = plan_notice_came_early(orchestrators)

    woken = replay.decide()

    checked = Call("provisioning_plan", {**RUN, "job": PLAN_TICKET})
    assert woken.new == [WaitFor(PLAN_NOTICE), Timer(replay.now + timedelta(seconds=0.25)), checked]
    assert replay.pending == [checked]  # the check timer was cancelled


def test_the_apply_waits_for_its_own_notice_and_backs_off_one_apply_call_per_timer(orchestrators):
    replay = plan_notice_came_early(orchestrators)
    replay.decide()
    replay.complete("provisioning_plan", PLANNED)  # the plan step launched the apply job

    waits = []
    for _ in range(6):  # the plan's kept notice never ends one of these waits
        waiting = replay.decide()
        assert waiting.calls == [] and waiting.new[0] == WaitFor(APPLY_NOTICE), waiting.new
        timer = waiting.new[1]
        assert isinstance(timer, Timer)
        waits.append((timer.fire_at - replay.now).total_seconds())
        replay.fire_timer()
        assert replay.decide().new == [Call("provisioning_apply", {**RUN, "job": APPLY_TICKET})]
        replay.complete("provisioning_apply", RUNNING)
    replay.decide()
    replay.raise_event(APPLY_NOTICE, {"job_id": "run-1-apply-1"})
    assert replay.decide().new == [Call("provisioning_apply", {**RUN, "job": APPLY_TICKET})]
    replay.complete("provisioning_apply", APPLIED)

    assert replay.decide().done is True
    assert waits == [0.25, 0.5, 1, 2, 4, 4]  # growing to the ticket's check_seconds
    applies = [e for e in replay.history if e.get("Name") == "provisioning_apply" and e["EventId"] >= 0]
    assert len(applies) == 7  # one apply call per timer, one for the notice: nothing in between


def applying(orchestrators) -> OrchestratorReplay:
    """The apply job runs (its plan found by the step at once); the next decision waits for it."""
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay, {"claim": "proceed", "plan_job": PLAN_TICKET})
    replay.decide()
    replay.complete("provisioning_plan", PLANNED)
    return replay


def test_after_its_notice_woke_the_run_an_attempt_s_checks_wait_for_their_timer_alone(orchestrators):
    replay = applying(orchestrators)
    replay.decide()
    replay.raise_event(APPLY_NOTICE, {"job_id": "run-1-apply-1"})
    replay.decide()
    replay.complete("provisioning_apply", RUNNING)  # the row said running still (the notice only wakes)

    again = replay.decide()

    assert again.new == [Timer(replay.now + timedelta(seconds=0.5))]  # no wait for the notice taken
    replay.fire_timer()
    assert replay.decide().new == [Call("provisioning_apply", {**RUN, "job": APPLY_TICKET})]


def test_a_dead_attempt_s_late_notice_does_not_wake_the_wait_for_the_next_attempt(orchestrators):
    replay = applying(orchestrators)
    replay.decide()
    replay.fire_timer()
    replay.decide()
    replay.complete("provisioning_apply", {"outcome": "waiting", "job_state": "dead", "detail": "no heartbeat"})
    assert replay.decide().new == [
        Call("provisioning_start_job", {**RUN, "kind": "apply", "attempt": 2}),
    ]
    second = {**ticket("apply", attempt=2, check_seconds=4), "notice": notice_event("run-1-apply-2")}
    replay.complete("provisioning_start_job", second)
    assert replay.decide().new == [WaitFor(notice_event("run-1-apply-2")), Timer(replay.now + timedelta(seconds=0.25))]

    replay.raise_event(APPLY_NOTICE, {"job_id": "run-1-apply-1"}, after=timedelta(milliseconds=100))
    assert replay.decide().new == []  # the dead attempt's notice: no call
    replay.raise_event(notice_event("run-1-apply-2"), {"job_id": "run-1-apply-2"}, after=timedelta(milliseconds=10))

    assert replay.decide().new == [Call("provisioning_apply", {**RUN, "job": second})]


def test_a_wake_handed_again_while_queued_waits_for_the_recheck_timer(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay, "wait")
    replay.decide()
    replay.raise_event(ENVIRONMENT_CHANGED, {"wake": "w1"})
    assert replay.decide().calls == ["provisioning_claim_environment"]
    replay.raise_event(ENVIRONMENT_CHANGED, {"wake": "w2"})  # while the claim runs: nothing waits for it
    replay.complete("provisioning_claim_environment", "wait")
    assert replay.decide().new == [
        WaitFor(ENVIRONMENT_CHANGED),
        Timer(replay.now + timedelta(seconds=2)),
        Call("provisioning_claim_environment", CLAIM),
    ]  # a new wake: the claim at once
    replay.complete("provisioning_claim_environment", "wait")

    repeated = replay.decide()  # the SDK hands w2 to this wait too

    assert repeated.new == [WaitFor(ENVIRONMENT_CHANGED), Timer(replay.now + timedelta(seconds=2))]
    replay.fire_timer()
    assert replay.decide().new == [Call("provisioning_claim_environment", CLAIM)]


def test_an_approval_wake_handed_again_turns_the_wait_into_a_bounded_poll_of_the_run_row(orchestrators):
    replay = awaiting_approval(orchestrators)
    replay.raise_event(APPROVAL_DECIDED, {"wake": "a1"})
    replay.decide()
    replay.raise_event(APPROVAL_DECIDED, {"wake": "a2"})  # while the decision is read
    replay.complete("provisioning_decision", None)
    replay.decide()  # a2 taken: read again
    replay.complete("provisioning_decision", None)
    repeated = replay.decide()  # a2 handed again: read once more, then poll
    assert repeated.calls == ["provisioning_decision"]
    replay.complete("provisioning_decision", None)

    polls = []
    for _ in range(8):
        waiting = replay.decide()
        assert len(waiting.new) == 1 and isinstance(waiting.new[0], Timer), waiting.new
        polls.append((waiting.new[0].fire_at - replay.now).total_seconds())
        replay.fire_timer()
        assert replay.decide().calls == ["provisioning_decision"]
        replay.complete("provisioning_decision", None)
    replay.decide()
    replay.fire_timer()
    replay.decide()
    replay.complete("provisioning_decision", "approved")

    assert polls == [APPROVAL_POLL_FIRST_SECONDS * 2**n for n in range(6)] + [APPROVAL_POLL_MAX_SECONDS] * 2
    assert replay.decide().calls == ["provisioning_start_job"]
