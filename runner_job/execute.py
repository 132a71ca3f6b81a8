"""Running the runner on a job's input, and turning what it raises into a :class:`JobResult`.

Every failure a runner reports becomes a named :class:`JobFailure` kind (the
app maps it back to the same exception the in-process path would have seen;
both ways are :mod:`shared.iac.jobs.failures`), carrying what was applied
before it. An error the job did not expect is
``job-error`` with only its type named: its text could quote anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.desired_state.api import EnvironmentSpecification, RunnerName
from shared.iac.api import (
    ApplyResult,
    EventLog,
    IaCSettings,
    JobFailure,
    JobInput,
    JobKind,
    JobResult,
    LockOwners,
    PulumiRunner,
    RunnerError,
    SavedPlans,
    StepJournal,
    applied_before,
    runner_for,
    to_wire,
)
from shared.platform import clock
from shared.provisioning.api import SecretUnresolvable, resolve_secrets


def execute(
    document: JobInput,
    *,
    journal: StepJournal,
    stop: Callable[[], bool],
    saved_plans: SavedPlans,
    events: EventLog,
    lock_owners: LockOwners | None = None,
) -> JobResult:
    started = clock.now_iso()
    iac = IaCSettings.model_validate(document.iac)  # the launching app's, whichever process runs the job
    specification = EnvironmentSpecification.model_validate(document.specification)
    options: dict[str, Any] = {}
    if specification.runner is RunnerName.PULUMI:
        options = {
            "saved_plans": saved_plans,
            "event_sink": events.event,
            "lock_owners": lock_owners,
            "lock_stale_seconds": iac.job_stale_seconds,
        }
    runner = runner_for(specification.runner, iac, **options)
    events.line(f"runner job {document.job_id} (attempt {document.attempt}): {document.kind.value} by {runner.name}")
    result = JobResult(
        job_id=document.job_id,
        kind=document.kind,
        attempt=document.attempt,
        started_at=started,
        finished_at=started,
        events_blob=events.blob_name,
    )
    try:
        if document.kind is JobKind.PLAN:
            wrapped = runner.wrapped
            if isinstance(wrapped, PulumiRunner):  # previews with the values apply will use, so the plan takes them
                plan = wrapped.plan(specification, document.target, _configuration(document, specification))
            else:
                plan = runner.plan(specification, document.target)
            result = result.model_copy(update={"plan": plan})
        else:
            if document.plan is None:
                raise RunnerError("the job's input carries no reviewed plan")
            applied = runner.apply(
                specification,
                document.target,
                document.plan,
                journal,
                _configuration(document, specification),
                deadline=None,  # a job is not sliced: no functionTimeout holds it
                stop=stop,
            )
            result = result.model_copy(update={"apply": applied})
    except (RunnerError, SecretUnresolvable) as error:  # a stop (ApplySliceEnded) only for an operator's cancel
        result = _failed(result, to_wire(error), applied_before(error))
    for line in result.apply.logs if result.apply else []:
        events.line(line)
    if result.failure:
        events.line(f"{result.failure.kind}: {result.failure.message}")
    return result.model_copy(update={"finished_at": clock.now_iso()})


def _configuration(document: JobInput, specification: EnvironmentSpecification) -> dict[str, str]:
    """The Config Platform's values (resolved by the app) and the secrets, resolved here with the job's identity."""
    return {**document.configuration, **resolve_secrets(specification.secrets)}


def _failed(result: JobResult, failure: JobFailure, applied: ApplyResult | None) -> JobResult:
    return result.model_copy(update={"failure": failure, "apply": applied})
