"""The provisioning run's orchestrator, replayed in process: what it decides after each history.

No host and no storage: each test builds the Durable history one episode at a
time (see ``tests.support.orchestrator_replay``) and compares the
orchestrator's decisions. The activities' answers are the ones
``shared.provisioning.lifecycle`` gives; what makes them is tested through the
host elsewhere.
"""

from __future__ import annotations

from datetime import timedelta

from orchestrations.provisioning import WAIT_ROUNDS_BEFORE_CONTINUE_AS_NEW
from orchestrations.provisioning_client import APPROVAL_DECIDED, ENVIRONMENT_CHANGED, RUNNER_JOB_FINISHED
from tests.support.orchestrator_replay import T0, Call, ContinueAsNew, OrchestratorReplay, Timer, WaitFor

RUN = {"tenant": "tenant-a", "environment": "dev-1", "run_id": "run-1", "recheck_seconds": 2}
PLANNED_FOR_REVIEW = {"outcome": "planned", "plan_digest": "sha256:plan", "requires_approval": True}
DEADLINE = T0 + timedelta(hours=24)
PLAN_JOB = {**RUN, "kind": "plan", "attempt": 1}
APPLY_JOB = {**RUN, "kind": "apply", "attempt": 1}


def ticket(kind: str = "plan", attempt: int = 1, check_seconds: float = 30) -> dict:
    return {
        "job_id": f"run-1-{kind}-{attempt}",
        "kind": kind,
        "attempt": attempt,
        "check_seconds": check_seconds,
        "max_attempts": 2,
    }


CLAIM = {**RUN, "start_plan": True}


def claimed(replay: OrchestratorReplay, answer: str | dict = "proceed") -> None:
    """The claim step, answered with ``answer``. A bare string is how the claim answered before it started
    the plan too (a history written by the previous version): the plan's start is then its own step."""
    assert replay.decide().new == [Call("provisioning_claim_environment", {**replay.input, "start_plan": True})]
    replay.complete("provisioning_claim_environment", answer)


def awaiting_approval(orchestrators) -> OrchestratorReplay:
    """A run whose plan needs review, waiting for a decision until ``DEADLINE``."""
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay)
    assert replay.decide().new == [Call("provisioning_start_job", PLAN_JOB)]
    replay.complete("provisioning_start_job", {})  # no job: the plan step runs by itself
    assert replay.decide().new == [Call("provisioning_plan", RUN)]
    replay.complete("provisioning_plan", PLANNED_FOR_REVIEW)
    assert replay.decide().new == [Call("provisioning_await_approval", RUN)]
    replay.complete("provisioning_await_approval", DEADLINE.isoformat())
    waiting = replay.decide()
    assert waiting.new == [WaitFor(APPROVAL_DECIDED), Timer(DEADLINE)]
    assert waiting.custom_status == "awaiting-approval"
    return replay


def finishes_with(replay: OrchestratorReplay, outcome: str, detail: str) -> None:
    """The next decision finishes the run with ``outcome``, and nothing else is called."""
    finishing = replay.decide()
    assert finishing.new == [Call("provisioning_finish", {**RUN, "outcome": outcome, "reason": None, "detail": detail})]
    replay.complete("provisioning_finish", [])
    ended = replay.decide()
    assert (ended.done, ended.new) == (True, [])
    assert ended.output == {"outcome": outcome, "reason": None, "detail": detail}
    assert ended.custom_status == outcome


# -- waiting for the environment ------------------------------------------------------------------


def test_a_queued_run_rechecks_its_environment_on_a_timer_or_when_woken(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay, "wait")

    first = replay.decide()
    assert first.new == [WaitFor(ENVIRONMENT_CHANGED), Timer(T0 + timedelta(seconds=2))]
    assert first.custom_status == "queued"

    replay.raise_event(ENVIRONMENT_CHANGED, {})  # woken before the recheck: claims again at once
    assert replay.decide().new == [Call("provisioning_claim_environment", CLAIM)]
    assert replay.pending == [Call("provisioning_claim_environment", CLAIM)]  # the recheck timer was cancelled


def test_a_run_still_queued_after_the_wait_limit_continues_as_new_with_its_rounds_reset(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)

    for round_number in range(1, WAIT_ROUNDS_BEFORE_CONTINUE_AS_NEW):
        claimed(replay, "wait")
        waiting = replay.decide()
        assert waiting.new == [WaitFor(ENVIRONMENT_CHANGED), Timer(replay.now + timedelta(seconds=2))], round_number
        replay.fire_timer()
    claimed(replay, "wait")  # the last round the limit allows

    continued = replay.decide()
    assert continued.new == [ContinueAsNew({**RUN, "wait_rounds": 0})]
    assert continued.done is True
    assert continued.output is None


def test_the_wait_rounds_carried_into_a_generation_count_towards_its_limit(orchestrators):
    replay = OrchestratorReplay(
        orchestrators.provisioning_run, {**RUN, "wait_rounds": WAIT_ROUNDS_BEFORE_CONTINUE_AS_NEW - 1}
    )
    claimed(replay, "wait")

    assert replay.decide().new == [ContinueAsNew({**RUN, "wait_rounds": 0})]


# -- approval against the deadline ----------------------------------------------------------------


def test_when_the_deadline_passes_without_a_decision_the_run_expires_without_applying(orchestrators):
    replay = awaiting_approval(orchestrators)

    replay.fire_timer()
    assert replay.decide().new == [Call("provisioning_decision", RUN)]  # the run row has the last word
    replay.complete("provisioning_decision", None)

    finishes_with(replay, "expired", "the approval deadline passed")


def test_a_decision_that_arrives_before_the_deadline_applies_the_run(orchestrators):
    replay = awaiting_approval(orchestrators)

    replay.raise_event(APPROVAL_DECIDED, {}, after=timedelta(minutes=5))
    assert replay.decide().new == [Call("provisioning_decision", RUN)]
    assert replay.pending == [Call("provisioning_decision", RUN)]  # the deadline timer was cancelled
    replay.complete("provisioning_decision", "approved")

    applying = replay.decide()
    assert applying.new == [Call("provisioning_start_job", APPLY_JOB)]
    assert applying.custom_status == "applying"


def test_an_approval_recorded_as_the_deadline_fires_still_applies_the_run(orchestrators):
    replay = awaiting_approval(orchestrators)

    replay.fire_timer()  # the event was lost or late, but the decision is on the run row
    replay.decide()
    replay.complete("provisioning_decision", "approved")

    assert replay.decide().new == [Call("provisioning_start_job", APPLY_JOB)]


def test_a_wake_without_a_decision_keeps_waiting_for_the_same_deadline(orchestrators):
    replay = awaiting_approval(orchestrators)

    replay.raise_event(APPROVAL_DECIDED, {}, after=timedelta(hours=1))
    replay.decide()
    replay.complete("provisioning_decision", None)

    again = replay.decide()
    assert again.new == [WaitFor(APPROVAL_DECIDED), Timer(DEADLINE)]  # not extended by the wake
    assert again.calls == []


def test_a_rejected_plan_ends_the_run_without_applying(orchestrators):
    replay = awaiting_approval(orchestrators)

    replay.raise_event(APPROVAL_DECIDED, {})
    replay.decide()
    replay.complete("provisioning_decision", "rejected")

    finishes_with(replay, "rejected", "an operator rejected the plan")


# -- cancelled ------------------------------------------------------------------------------------


def test_a_run_cancelled_while_planning_finishes_cancelled_without_waiting_or_applying(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay)
    planning = replay.decide()
    assert planning.new == [Call("provisioning_start_job", PLAN_JOB)]
    assert planning.custom_status == "planning"
    replay.complete("provisioning_start_job", {})
    assert replay.decide().new == [Call("provisioning_plan", RUN)]

    replay.complete("provisioning_plan", {"outcome": "cancelled", "reason": "cancelled", "detail": "cancelled"})

    finishing = replay.decide()
    assert finishing.new == [
        Call("provisioning_finish", {**RUN, "outcome": "cancelled", "reason": "cancelled", "detail": "cancelled"})
    ]
    replay.complete("provisioning_finish", [])
    ended = replay.decide()
    assert ended.done is True
    assert ended.output == {"outcome": "cancelled", "reason": "cancelled", "detail": "cancelled"}


def test_a_run_cancelled_while_queued_finishes_without_planning(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay, "cancelled")

    finishes_with(replay, "cancelled", "an operator cancelled the run")


def test_finishing_wakes_the_runs_queued_behind_this_one(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay, "cancelled")
    replay.decide()

    replay.complete("provisioning_finish", ["run-2", "run-3"])

    assert replay.decide().new == [Call("provisioning_wake_runs", {"run_ids": ["run-2", "run-3"]})]


# -- runner jobs ----------------------------------------------------------------------------------


def planning_by_job(orchestrators, check_seconds: float = 30) -> OrchestratorReplay:
    """A run whose plan job was launched; the next decision waits for it."""
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay)
    replay.decide()
    replay.complete("provisioning_start_job", ticket(check_seconds=check_seconds))
    return replay


def still_running(replay: OrchestratorReplay) -> None:
    replay.complete("provisioning_plan", {"outcome": "waiting", "job_state": "running", "detail": "heartbeat 1 s ago"})


def test_a_job_s_notice_wakes_the_run_whose_plan_step_then_reads_the_job_s_result(orchestrators):
    replay = planning_by_job(orchestrators)
    waiting = replay.decide()
    assert waiting.new == [WaitFor(RUNNER_JOB_FINISHED), Timer(replay.now + timedelta(seconds=0.25))]

    replay.raise_event(RUNNER_JOB_FINISHED, {"job_id": "run-1-plan-1"}, after=timedelta(milliseconds=200))
    assert replay.decide().new == [Call("provisioning_plan", {**RUN, "job": ticket()})]
    assert replay.pending == [Call("provisioning_plan", {**RUN, "job": ticket()})]  # the timer was cancelled
    replay.complete("provisioning_plan", PLANNED_FOR_REVIEW)

    assert replay.decide().new == [Call("provisioning_await_approval", RUN)]


def test_the_job_checks_back_off_from_a_quarter_second_to_the_ticket_s_interval(orchestrators):
    replay = planning_by_job(orchestrators, check_seconds=3)
    waits = []
    for _ in range(5):
        waiting = replay.decide()
        timer = next(d for d in waiting.new if isinstance(d, Timer))
        waits.append((timer.fire_at - replay.now).total_seconds())
        replay.fire_timer()
        replay.decide()
        still_running(replay)

    assert waits == [0.25, 0.5, 1, 2, 3]


def test_a_dead_job_is_launched_once_more_and_a_second_death_fails_the_step_with_the_reason(orchestrators):
    replay = planning_by_job(orchestrators)
    replay.decide()
    replay.fire_timer()
    replay.decide()
    replay.complete("provisioning_plan", {"outcome": "waiting", "job_state": "dead", "detail": "no heartbeat for 95 s"})

    assert replay.decide().new == [Call("provisioning_start_job", {**PLAN_JOB, "attempt": 2})]
    replay.complete("provisioning_start_job", ticket(attempt=2))
    replay.decide()
    replay.fire_timer()
    replay.decide()
    replay.complete("provisioning_plan", {"outcome": "waiting", "job_state": "dead", "detail": "no heartbeat for 91 s"})

    dead = {**ticket(attempt=2), "dead": "no heartbeat for 91 s"}
    assert replay.decide().new == [Call("provisioning_plan", {**RUN, "job": dead})]


def test_a_plan_step_that_launched_the_apply_job_is_followed_by_waiting_for_that_job_not_a_new_launch(orchestrators):
    replay = planning_by_job(orchestrators)
    replay.decide()
    replay.raise_event(RUNNER_JOB_FINISHED, {"job_id": "run-1-plan-1"})
    replay.decide()
    apply_ticket = ticket("apply")
    replay.complete(
        "provisioning_plan",
        {"outcome": "planned", "plan_digest": "sha256:plan", "requires_approval": False, "apply_job": apply_ticket},
    )

    applying = replay.decide()
    assert applying.new == [WaitFor(RUNNER_JOB_FINISHED), Timer(replay.now + timedelta(seconds=0.25))]
    assert applying.calls == [] and applying.custom_status == "applying"
    replay.raise_event(RUNNER_JOB_FINISHED, {"job_id": "run-1-apply-1"})
    assert replay.decide().new == [Call("provisioning_apply", {**RUN, "job": apply_ticket})]


def test_an_apply_step_that_finished_the_run_is_not_finished_again_and_wakes_the_runs_behind_it(orchestrators):
    replay = planning_by_job(orchestrators)
    replay.decide()
    replay.raise_event(RUNNER_JOB_FINISHED, {"job_id": "run-1-plan-1"})
    replay.decide()
    apply_ticket = ticket("apply")
    replay.complete(
        "provisioning_plan",
        {"outcome": "planned", "plan_digest": "sha256:plan", "requires_approval": False, "apply_job": apply_ticket},
    )
    replay.decide()
    replay.raise_event(RUNNER_JOB_FINISHED, {"job_id": "run-1-apply-1"})
    replay.decide()

    replay.complete(
        "provisioning_apply",
        {"outcome": "applied", "reason": None, "detail": "", "finished": True, "waiting_runs": ["run-2"]},
    )

    waking = replay.decide()
    assert waking.new == [Call("provisioning_wake_runs", {"run_ids": ["run-2"]})]  # no provisioning_finish
    replay.complete("provisioning_wake_runs", 1)
    ended = replay.decide()
    assert ended.done is True and ended.output == {"outcome": "applied", "reason": None, "detail": ""}


def test_a_plan_job_that_cannot_start_because_the_policy_is_unreadable_fails_the_run_without_a_job(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay)
    replay.decide()
    unavailable = {"outcome": "failed", "reason": "policy-unavailable", "detail": "GovernanceHost did not answer"}

    replay.complete("provisioning_start_job", unavailable)

    finishing = replay.decide()
    assert finishing.new == [Call("provisioning_finish", {**RUN, **unavailable})]


# -- the claim starts the plan ----------------------------------------------------------------------


def test_a_claim_that_started_the_plan_job_is_followed_by_the_plan_step_waiting_for_it_with_no_launch_step(
    orchestrators,
):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    plan_ticket = {**ticket(), "wait_seconds": 2.0}
    claimed(replay, {"claim": "proceed", "plan_job": plan_ticket})

    planning = replay.decide()
    assert planning.new == [Call("provisioning_plan", {**RUN, "job": plan_ticket, "job_wait_seconds": 2.0})]
    assert planning.custom_status == "planning"
    replay.complete("provisioning_plan", PLANNED_FOR_REVIEW)

    assert replay.decide().new == [Call("provisioning_await_approval", RUN)]


def test_a_claim_whose_plan_could_not_start_fails_the_run_without_a_job(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    unavailable = {"outcome": "failed", "reason": "policy-unavailable", "detail": "GovernanceHost did not answer"}
    claimed(replay, {"claim": "proceed", "plan_job": unavailable})

    finishing = replay.decide()
    assert finishing.new == [Call("provisioning_finish", {**RUN, **unavailable})]


def test_a_claim_that_started_no_job_runs_the_plan_step_by_itself(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay, {"claim": "proceed", "plan_job": {}})  # jobs off, or nothing left to plan

    assert replay.decide().new == [Call("provisioning_plan", RUN)]


def test_a_claim_that_must_wait_starts_nothing_and_waits_for_its_environment(orchestrators):
    replay = OrchestratorReplay(orchestrators.provisioning_run, RUN)
    claimed(replay, {"claim": "wait"})

    waiting = replay.decide()
    assert waiting.new == [WaitFor(ENVIRONMENT_CHANGED), Timer(T0 + timedelta(seconds=2))]
