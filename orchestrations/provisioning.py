"""The provisioning run: wait for the environment, plan, approve, apply, finish.

The orchestrator is deterministic: it decides only from its input and from
activity results (which the history replays); every side effect is an
activity in ``shared.provisioning.lifecycle``, each idempotent. The instance
id is the run id, so a run has at most one orchestration.

Plan and apply run in **runner jobs** (``shared.provisioning.runner_jobs``):
``provisioning_start_job`` launches one and answers its ticket; the
orchestration then waits for the job's completion notice or its check timer,
whichever comes first, and calls the step with the ticket, which reads the
job's row (the truth: the notice only wakes) and answers ``waiting`` until the
job finished. A dead job is launched again as a new attempt up to the
ticket's ``max_attempts``; after that the step is called with the ticket
marked ``dead`` and fails the run with a receipt. No
activity holds a long apply: each one is a few storage calls.

Activity rounds are the run's overhead, so three are folded into the steps:
the claim of the environment starts the plan job once the run holds it (its
answer carries ``plan_job``), a plan step whose run needs no approval
launches the apply job itself (after the policy verdict and the plan
receipt; its answer carries ``apply_job``), and an apply step that ends the
run finishes it (``finished``, with the runs to wake). A history written
before any of them still replays: the orchestration calls the separate steps
when the answers do not carry them (a claim answered as a bare string). Each
branch kept for an older history says so ("a history from before") and is
replayed over a recorded history in tests/orchestrations/test_previous_version_replay.py;
when one may be deleted is DESIGN.md's "Orchestration versioning". With jobs off
(``RuntimeCloud:IaC:JobLauncher=in-process``) the ticket is empty and the
steps run the runner in the activity, the apply in slices.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import datetime, timedelta
from typing import Any

import azure.durable_functions as df

from orchestrations.provisioning_client import (
    APPROVAL_DECIDED,
    ENVIRONMENT_CHANGED,
    ORCHESTRATOR,
    wake,
)
from orchestrations.waits import JobNotice, Wakes
from shared.iac.api import JobKind
from shared.platform.telemetry import annotate
from shared.provisioning.api import Claim, Outcome, RunRef, StepAnswer
from shared.wiring.provisioning import steps

bp = df.Blueprint()

RETRY = df.RetryOptions(first_retry_interval_in_milliseconds=2000, max_number_of_attempts=6)
WAIT_ROUNDS_BEFORE_CONTINUE_AS_NEW = 40  # keeps a long wait's history short
DECISION_DETAILS = {
    Outcome.EXPIRED: "the approval deadline passed",
    Outcome.REJECTED: "an operator rejected the plan",
    Outcome.CANCELLED: "an operator cancelled the run",
    Outcome.SUPERSEDED: "newer desired state was declared while the run awaited approval",
}
FIRST_JOB_CHECK_SECONDS = 0.25
# After a repeated approval wake (see orchestrations.waits) the decision is read on a timer growing to a bound:
# a decision is then found within five minutes, and a day's wait costs under three hundred reads.
APPROVAL_POLL_FIRST_SECONDS, APPROVAL_POLL_MAX_SECONDS = 5.0, 300.0
APPROVED = "approved"  # the decision that lets a run apply; every other one ends it as that outcome

Steps = Generator[Any, Any, Any]

# Activity inputs are annotated plain ``dict``: the Python worker refuses a
# parameterised annotation such as ``dict[str, Any]`` on a binding ("invalid
# non-type annotation"), and one refused function fails the whole app.


@bp.orchestration_trigger(context_name="context", orchestration=ORCHESTRATOR)
def provisioning_run(context: df.DurableOrchestrationContext) -> Steps:
    run: dict[str, Any] = context.get_input()
    claimed = yield from _wait_for_environment(context, run)
    if claimed is None:  # continued as new
        return None
    claim, plan_job = claimed
    if claim is Claim.FINISHED:
        return {"outcome": Outcome.FINISHED}
    if claim is Claim.SUPERSEDED:
        return (
            yield from _finish(context, run, Outcome.SUPERSEDED, None, "a newer run of this environment was declared")
        )
    if claim is Claim.CANCELLED:
        return (yield from _finish(context, run, Outcome.CANCELLED, None, "an operator cancelled the run"))

    context.set_custom_status("planning")
    plan: StepAnswer = yield from _job_step(context, run, JobKind.PLAN, "provisioning_plan", plan_job)
    planned = Outcome(plan["outcome"])
    if planned in (Outcome.FAILED, Outcome.CANCELLED):
        return (yield from _finish(context, run, planned, plan.get("reason"), plan.get("detail", "")))

    if plan["requires_approval"]:
        decision = yield from _wait_for_approval(context, run)
        if decision != APPROVED:
            ended = Outcome(decision)
            return (yield from _finish(context, run, ended, None, DECISION_DETAILS[ended]))

    context.set_custom_status("applying")
    launched = plan.get("apply_job") if not plan["requires_approval"] else None  # the plan step started it
    result: StepAnswer = yield from _job_step(context, run, JobKind.APPLY, "provisioning_apply", launched)
    while Outcome(result["outcome"]) is Outcome.CONTINUE:  # in process, each slice is its own activity
        result = yield context.call_activity_with_retry("provisioning_apply", RETRY, run)
    outcome, reason, detail = Outcome(result["outcome"]), result.get("reason"), result.get("detail", "")
    if result.get("finished"):  # the apply step ended the run itself: only wake the runs behind it
        return (yield from _finished(context, outcome, reason, detail, list(result.get("waiting_runs") or [])))
    return (yield from _finish(context, run, outcome, reason, detail))


def _job_step(
    context: df.DurableOrchestrationContext,
    run: dict[str, Any],
    kind: JobKind,
    step: str,
    launched: dict[str, Any] | None,
) -> Steps:
    """The plan or apply step through its runner job: launch the job (unless ``launched``: the plan step
    started the apply's), call the step at once (it waits up to the ticket's ``wait_seconds`` for a short
    job), then each time the job's notice or the check timer wakes the run; the step answers ``waiting``
    until the job finished. A start that fails (the policy unreadable before
    a plan) is the step's answer.

    The checks back off from a quarter second to the ticket's ``check_seconds``: a short job whose notice is
    slow is found soon, and a long apply costs a step call every ``check_seconds``. Each wait is for this
    attempt's own notice (:class:`JobNotice`), so a notice that came early, or one of another job, never ends
    a later wait at once. A dead job is launched
    again as a new attempt, up to the ticket's ``max_attempts``; then the step is called with the ticket
    marked ``dead`` and fails the run with a receipt."""
    attempt = 1
    while True:
        job = (
            launched
            if launched is not None
            else (
                yield context.call_activity_with_retry(
                    "provisioning_start_job", RETRY, {**run, "kind": kind.value, "attempt": attempt}
                )
            )
        )
        launched = None
        if not job:  # no job to wait for: the step runs (or answers) by itself
            return (yield context.call_activity_with_retry(step, RETRY, run))
        if "outcome" in job:  # the job could not start: that is the step's answer
            return job
        wait = FIRST_JOB_CHECK_SECONDS
        # A ticket from before JobWaitSeconds (a history replayed after an upgrade) has no wait: it replays
        # the timer-first order it was written with. A new one is checked at once, the step waiting briefly.
        waits_in_step = float(job.get("wait_seconds") or 0)
        notice = JobNotice(job)
        while True:
            step_input: dict[str, Any] = {**run, "job": job}
            if waits_in_step:
                step_input["job_wait_seconds"], waits_in_step = waits_in_step, 0.0
            else:
                wait = min(float(job["check_seconds"]), wait)
                yield from notice.or_timer(context, context.current_utc_datetime + timedelta(seconds=wait))
                wait *= 2
            answer: StepAnswer = yield context.call_activity_with_retry(step, RETRY, step_input)
            if Outcome(answer["outcome"]) is not Outcome.WAITING:
                return answer
            if answer.get("job_state") == "dead":
                break
        if attempt >= int(job["max_attempts"]):
            dead = {**job, "dead": answer.get("detail", "the job stopped reporting")}
            return (yield context.call_activity_with_retry(step, RETRY, {**run, "job": dead}))
        attempt += 1


def _wait_for_environment(context: df.DurableOrchestrationContext, run: dict[str, Any]) -> Steps:
    """The claim, with the plan's start when the claim started it (None: a history from before, whose claim
    answered the claim alone; the plan is then started by its own activity). None: continued as new."""
    rounds = int(run.get("wait_rounds", 0))
    wakes = Wakes(ENVIRONMENT_CHANGED)
    while True:
        answer = yield context.call_activity_with_retry(
            "provisioning_claim_environment", RETRY, {**run, "start_plan": True}
        )
        claim, plan_job = _claim_of(answer)
        if claim is not Claim.WAIT:
            return claim, plan_job
        context.set_custom_status("queued")
        rounds += 1
        if rounds >= WAIT_ROUNDS_BEFORE_CONTINUE_AS_NEW:
            context.continue_as_new({**run, "wait_rounds": 0})
            return None
        recheck = context.current_utc_datetime + timedelta(seconds=float(run["recheck_seconds"]))
        timer = context.create_timer(recheck)
        if (yield from wakes.or_timer(context, timer)) == "repeat":
            yield timer  # a wake this execution took already, handed again: the recheck is the next round


def _wait_for_approval(context: df.DurableOrchestrationContext, run: dict[str, Any]) -> Steps:
    deadline_text = yield context.call_activity_with_retry("provisioning_await_approval", RETRY, run)
    deadline = datetime.fromisoformat(deadline_text)
    context.set_custom_status("awaiting-approval")
    wakes, poll = Wakes(APPROVAL_DECIDED), 0.0
    while True:
        if poll:  # a wake came again: every later wait would end at once, so the run row is polled
            fire_at = min(deadline, context.current_utc_datetime + timedelta(seconds=poll))
            yield context.create_timer(fire_at)
            poll, expired = min(poll * 2, APPROVAL_POLL_MAX_SECONDS), fire_at >= deadline
        else:
            # A run superseded as it began to wait gets a deadline of now: the timer fires at once.
            timer = context.create_timer(deadline)
            woken = yield from wakes.or_timer(context, timer)
            if woken == "repeat":
                timer.cancel()
                poll = APPROVAL_POLL_FIRST_SECONDS
            expired = woken == "timer"
        # The run row is the source of truth; the event only wakes us.
        decision = yield context.call_activity_with_retry("provisioning_decision", RETRY, run)
        if decision is not None:
            return decision
        if expired:
            return Outcome.EXPIRED.value


def _claim_of(answer: str | dict[str, Any]) -> tuple[Claim, dict[str, Any] | None]:
    """The claim and the plan's start it made; a bare string is a claim answered by the previous version."""
    if isinstance(answer, str):
        return Claim(answer), None
    return Claim(answer["claim"]), answer.get("plan_job")


def _finish(
    context: df.DurableOrchestrationContext, run: dict[str, Any], outcome: Outcome, reason: str | None, detail: str
) -> Steps:
    waiting = yield context.call_activity_with_retry(
        "provisioning_finish", RETRY, {**run, "outcome": outcome, "reason": reason, "detail": detail}
    )
    return (yield from _finished(context, outcome, reason, detail, waiting))


def _finished(
    context: df.DurableOrchestrationContext, outcome: Outcome, reason: str | None, detail: str, waiting: list[str]
) -> Steps:
    if waiting:
        yield context.call_activity_with_retry("provisioning_wake_runs", RETRY, {"run_ids": waiting})
    context.set_custom_status(outcome.value)
    return {"outcome": outcome, "reason": reason, "detail": detail}


def _ref(run: dict[str, Any]) -> RunRef:
    """The run an activity works on, named on its span (the host's activity span)."""
    ref = RunRef.of(run)
    annotate(tenant=ref.tenant, environment=ref.environment, run=ref.run_id)
    return ref


@bp.activity_trigger(input_name="run", activity="provisioning_claim_environment")
def provisioning_claim_environment(run: dict) -> str | dict:
    """The claim; asked with ``start_plan``, the claim and, once the run holds its environment, the plan's
    start in the same call (one activity round less). Without it (an orchestration from before), the claim."""
    if run.get("start_plan"):
        return dict(steps().claim_and_start_plan(_ref(run)))
    return steps().claim_environment(_ref(run))


@bp.activity_trigger(input_name="run", activity="provisioning_plan")
def provisioning_plan(run: dict) -> StepAnswer:
    return steps().plan(_ref(run), run.get("job") or None, float(run.get("job_wait_seconds") or 0))


@bp.activity_trigger(input_name="request", activity="provisioning_start_job")
def provisioning_start_job(request: dict) -> dict:
    return dict(steps().start_job(_ref(request), JobKind(request["kind"]), int(request["attempt"])))


@bp.activity_trigger(input_name="run", activity="provisioning_await_approval")
def provisioning_await_approval(run: dict) -> str:
    return steps().await_approval(_ref(run))


@bp.activity_trigger(input_name="run", activity="provisioning_decision")
def provisioning_decision(run: dict) -> str | None:
    return steps().decision(_ref(run))


@bp.activity_trigger(input_name="run", activity="provisioning_apply")
def provisioning_apply(run: dict) -> StepAnswer:
    return steps().apply(_ref(run), run.get("job") or None, float(run.get("job_wait_seconds") or 0))


@bp.activity_trigger(input_name="request", activity="provisioning_finish")
def provisioning_finish(request: dict) -> list[str]:
    return steps().finish(_ref(request), Outcome(request["outcome"]), request.get("reason"), request.get("detail", ""))


@bp.activity_trigger(input_name="request", activity="provisioning_wake_runs")
@bp.durable_client_input(client_name="client")
async def provisioning_wake_runs(request: dict, client: df.DurableOrchestrationClient) -> int:
    return await wake(client, request["run_ids"])
