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

from datetime import datetime, timedelta
from typing import NotRequired, TypedDict

from typing_extensions import TypeIs

from orchestrations.durable import (
    Activity,
    DurableClient,
    OrchestrationContext,
    Steps,
    blueprint,
    retry_options,
)
from orchestrations.provisioning_client import (
    APPROVAL_DECIDED,
    ENVIRONMENT_CHANGED,
    ORCHESTRATOR,
    RunDocument,
    RunKeys,
    wake,
)
from orchestrations.waits import JobNotice, Wakes
from shared.iac.api import JobKind
from shared.platform.telemetry import annotate
from shared.provisioning.api import Claim, ClaimAnswer, JobTicket, Outcome, RunRef, StepAnswer
from shared.wiring.provisioning import steps

bp = blueprint()

RETRY = retry_options(first_retry_ms=2000, max_attempts=6)
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


# -- what the orchestration and its activities exchange (JSON in the history: see orchestrations.durable) ----
# Each step's payload is the run's document with the step's own keys.


class ClaimRequest(RunKeys, total=False):
    start_plan: bool  # claim and start the plan job in one step (a history from before asked without it)


class StartJobRequest(RunKeys):
    kind: str  # a JobKind's value
    attempt: int


class StepRequest(RunKeys, total=False):
    """The plan or apply step's input."""

    job: JobTicket  # the step's runner job (none: the step runs the runner in process, or the job never started)
    job_wait_seconds: float  # the call right after the launch: how long the step waits for a short job


class FinishRequest(RunKeys):
    outcome: Outcome
    reason: str | None  # a FailureReason's value
    detail: str


class WakeRunsRequest(TypedDict):
    run_ids: list[str]


class RunResult(TypedDict):
    """The orchestration's output."""

    outcome: Outcome
    reason: NotRequired[str | None]  # absent when the run had ended before this orchestration looked
    detail: NotRequired[str]


CLAIM = Activity[ClaimRequest, ClaimAnswer | str]("provisioning_claim_environment", RETRY)
START_JOB = Activity[StartJobRequest, JobTicket | StepAnswer]("provisioning_start_job", RETRY)
PLAN = Activity[StepRequest, StepAnswer]("provisioning_plan", RETRY)
AWAIT_APPROVAL = Activity[RunDocument, str]("provisioning_await_approval", RETRY)  # the deadline (ISO 8601)
DECISION = Activity[RunDocument, str | None]("provisioning_decision", RETRY)
APPLY = Activity[StepRequest, StepAnswer]("provisioning_apply", RETRY)
FINISH = Activity[FinishRequest, list[str]]("provisioning_finish", RETRY)  # the runs to wake
WAKE_RUNS = Activity[WakeRunsRequest, int]("provisioning_wake_runs", RETRY)


@bp.orchestration_trigger(context_name="context", orchestration=ORCHESTRATOR)
def provisioning_run(context: OrchestrationContext) -> Steps[RunResult | None]:
    run: RunDocument = context.get_input()
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
    plan = yield from _job_step(context, run, JobKind.PLAN, PLAN, plan_job)
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
    result = yield from _job_step(context, run, JobKind.APPLY, APPLY, launched)
    while Outcome(result["outcome"]) is Outcome.CONTINUE:  # in process, each slice is its own activity
        result = yield from APPLY.call(context, {**run})
    outcome, reason, detail = Outcome(result["outcome"]), result.get("reason"), result.get("detail", "")
    if result.get("finished"):  # the apply step ended the run itself: only wake the runs behind it
        return (yield from _finished(context, outcome, reason, detail, list(result.get("waiting_runs") or [])))
    return (yield from _finish(context, run, outcome, reason, detail))


def _job_step(
    context: OrchestrationContext,
    run: RunDocument,
    kind: JobKind,
    step: Activity[StepRequest, StepAnswer],
    launched: JobTicket | StepAnswer | None,
) -> Steps[StepAnswer]:
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
            else (yield from START_JOB.call(context, {**run, "kind": kind.value, "attempt": attempt}))
        )
        launched = None
        if not job:  # no job to wait for: the step runs (or answers) by itself
            return (yield from step.call(context, {**run}))
        if _not_started(job):  # the job could not start: that is the step's answer
            return job
        wait = FIRST_JOB_CHECK_SECONDS
        # A ticket from before JobWaitSeconds (a history replayed after an upgrade) has no wait: it replays
        # the timer-first order it was written with. A new one is checked at once, the step waiting briefly.
        waits_in_step = float(job.get("wait_seconds") or 0)
        notice = JobNotice(job)
        while True:
            step_input: StepRequest = {**run, "job": job}
            if waits_in_step:
                step_input["job_wait_seconds"], waits_in_step = waits_in_step, 0.0
            else:
                wait = min(float(job["check_seconds"]), wait)
                yield from notice.or_timer(context, context.current_utc_datetime + timedelta(seconds=wait))
                wait *= 2
            answer = yield from step.call(context, step_input)
            if Outcome(answer["outcome"]) is not Outcome.WAITING:
                return answer
            if answer.get("job_state") == "dead":
                break
        if attempt >= int(job["max_attempts"]):
            dead: JobTicket = {**job, "dead": answer.get("detail", "the job stopped reporting")}
            return (yield from step.call(context, {**run, "job": dead}))
        attempt += 1


def _not_started(start: JobTicket | StepAnswer) -> TypeIs[StepAnswer]:
    """A start answered as the step would (a plan that cannot start fails the run), not with a ticket."""
    return "outcome" in start


def _wait_for_environment(
    context: OrchestrationContext, run: RunDocument
) -> Steps[tuple[Claim, JobTicket | StepAnswer | None] | None]:
    """The claim, with the plan's start when the claim started it (None: a history from before, whose claim
    answered the claim alone; the plan is then started by its own activity). None: continued as new."""
    rounds = int(run.get("wait_rounds", 0))
    wakes = Wakes(ENVIRONMENT_CHANGED)
    while True:
        answer = yield from CLAIM.call(context, {**run, "start_plan": True})
        claim, plan_job = _claim_of(answer)
        if claim is not Claim.WAIT:
            return claim, plan_job
        context.set_custom_status("queued")
        rounds += 1
        if rounds >= WAIT_ROUNDS_BEFORE_CONTINUE_AS_NEW:
            restarted: RunDocument = {**run, "wait_rounds": 0}
            context.continue_as_new(restarted)
            return None
        recheck = context.current_utc_datetime + timedelta(seconds=float(run["recheck_seconds"]))
        timer = context.create_timer(recheck)
        if (yield from wakes.or_timer(context, timer)) == "repeat":
            yield timer  # a wake this execution took already, handed again: the recheck is the next round


def _wait_for_approval(context: OrchestrationContext, run: RunDocument) -> Steps[str]:
    deadline_text = yield from AWAIT_APPROVAL.call(context, run)
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
        decision = yield from DECISION.call(context, run)
        if decision is not None:
            return decision
        if expired:
            return Outcome.EXPIRED.value


def _claim_of(answer: ClaimAnswer | str) -> tuple[Claim, JobTicket | StepAnswer | None]:
    """The claim and the plan's start it made; a bare string is a claim answered by the previous version."""
    if isinstance(answer, str):
        return Claim(answer), None
    return Claim(answer["claim"]), answer.get("plan_job")


def _finish(
    context: OrchestrationContext, run: RunDocument, outcome: Outcome, reason: str | None, detail: str
) -> Steps[RunResult]:
    waiting = yield from FINISH.call(context, {**run, "outcome": outcome, "reason": reason, "detail": detail})
    return (yield from _finished(context, outcome, reason, detail, waiting))


def _finished(
    context: OrchestrationContext, outcome: Outcome, reason: str | None, detail: str, waiting: list[str]
) -> Steps[RunResult]:
    if waiting:
        yield from WAKE_RUNS.call(context, {"run_ids": waiting})
    context.set_custom_status(outcome.value)
    return {"outcome": outcome, "reason": reason, "detail": detail}


def _ref(run: RunKeys) -> RunRef:
    """The run an activity works on, named on its span (the host's activity span)."""
    ref = RunRef(run["tenant"], run["environment"], run["run_id"])
    annotate(tenant=ref.tenant, environment=ref.environment, run=ref.run_id)
    return ref


# The activities' payloads are TypedDicts, which the Python worker takes as binding annotations (a
# parameterised one such as ``dict[str, Any]`` it refuses: "invalid non-type annotation"); they are
# module-level names, as the worker resolves the annotations when it indexes the app.


@CLAIM.trigger(bp, input_name="run")
def provisioning_claim_environment(run: ClaimRequest) -> ClaimAnswer | str:
    """The claim; asked with ``start_plan``, the claim and, once the run holds its environment, the plan's
    start in the same call (one activity round less). Without it (an orchestration from before), the claim."""
    if run.get("start_plan"):
        return steps().claim_and_start_plan(_ref(run))
    return steps().claim_environment(_ref(run))


@PLAN.trigger(bp, input_name="run")
def provisioning_plan(run: StepRequest) -> StepAnswer:
    return steps().plan(_ref(run), run.get("job") or None, float(run.get("job_wait_seconds") or 0))


@START_JOB.trigger(bp, input_name="request")
def provisioning_start_job(request: StartJobRequest) -> JobTicket | StepAnswer:
    return steps().start_job(_ref(request), JobKind(request["kind"]), int(request["attempt"]))


@AWAIT_APPROVAL.trigger(bp, input_name="run")
def provisioning_await_approval(run: RunDocument) -> str:
    return steps().await_approval(_ref(run))


@DECISION.trigger(bp, input_name="run")
def provisioning_decision(run: RunDocument) -> str | None:
    return steps().decision(_ref(run))


@APPLY.trigger(bp, input_name="run")
def provisioning_apply(run: StepRequest) -> StepAnswer:
    return steps().apply(_ref(run), run.get("job") or None, float(run.get("job_wait_seconds") or 0))


@FINISH.trigger(bp, input_name="request")
def provisioning_finish(request: FinishRequest) -> list[str]:
    return steps().finish(_ref(request), Outcome(request["outcome"]), request.get("reason"), request.get("detail", ""))


@bp.activity_trigger(input_name="request", activity=WAKE_RUNS.name)
@bp.durable_client_input(client_name="client")
async def provisioning_wake_runs(request: WakeRunsRequest, client: DurableClient) -> int:
    return await wake(client, request["run_ids"])
