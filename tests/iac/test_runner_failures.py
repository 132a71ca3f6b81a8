"""The one converter between a runner's failures and their wire form, both ways, for every kind.

A job reports what its runner raised (``to_wire``); the host raises it again (``from_wire``) and
provisioning ends the run by the failure's kind (``failure_reasons``). For every kind the run must
end as it would have, had the runner raised the same exception in the host's own process. Pure
translation: no storage, no host.
"""

from __future__ import annotations

from typing import get_args

import pytest

from shared.iac.jobs.failures import (
    KINDS,
    STOPPED_MESSAGE,
    WIRE_KINDS,
    RunnerFailure,
    applied_before,
    from_wire,
    kind_of,
    to_wire,
)
from shared.iac.jobs.protocol import FailureKind, JobFailure
from shared.iac.jobs.results import JobResultTampered
from shared.iac.model import (
    Action,
    ApplyFailed,
    ApplyResult,
    ApplySliceEnded,
    PlanNoLongerHolds,
    RunnerError,
    SecretUnresolvable,
    StepResult,
    StepStatus,
    TargetUnreachable,
)
from shared.iac.pulumi.errors import StackBusy
from shared.provisioning.failure_reasons import APPLY_ENDINGS, PLAN_REASONS, apply_failure, plan_failure
from shared.provisioning.runs import FailureReason

APPLIED = ApplyResult(
    runner="embedded",
    runner_version="1",
    steps=[
        StepResult(
            address="storage/a",
            action=Action.CREATE,
            status=StepStatus.APPLIED,
            started_at="2026-01-01T00:00:00Z",
            finished_at="2026-01-01T00:00:01Z",
        )
    ],
)

# One exception of each kind a job can report, as its runner raises it, with the kind it must carry.
RAISED_IN_THE_JOB: list[tuple[RunnerFailure, FailureKind]] = [
    (ApplySliceEnded("stopped between two steps", APPLIED), "stopped"),
    (TargetUnreachable("the target did not answer", APPLIED), "target-unreachable"),
    (TargetUnreachable("the target did not answer", None), "target-unreachable"),
    (PlanNoLongerHolds("storage/a changed", None), "plan-no-longer-holds"),
    (SecretUnresolvable("kv://vault/name: forbidden"), "secret-unresolvable"),
    (ApplyFailed("step storage/b failed", APPLIED), "apply-failed"),
    (RunnerError("no program", None), "runner-error"),
]


@pytest.mark.parametrize(("error", "kind"), RAISED_IN_THE_JOB, ids=lambda value: str(value)[:30])
def test_an_exception_crosses_the_wire_and_is_raised_again_as_itself(error: RunnerFailure, kind: str) -> None:
    wire = to_wire(error)
    assert wire == JobFailure(kind=kind, message=str(error))
    again = from_wire(JobFailure.model_validate_json(wire.model_dump_json()), applied_before(error))
    assert type(again) is type(error)
    assert str(again) == str(error)
    assert applied_before(again) == applied_before(error)
    assert to_wire(again) == wire


@pytest.mark.parametrize("kind", WIRE_KINDS)
def test_every_wire_kind_is_raised_on_the_host_as_an_exception_of_its_own_kind_or_a_plainer_one(kind: str) -> None:
    failure = JobFailure(kind=kind, message="what the runner said")
    again = from_wire(failure, APPLIED)
    assert str(again) == "what the runner said"
    # The host keeps every distinction its reasons need: the job's own failure, and a runner error that
    # applied steps before it, are a runner error with what was applied there (both end APPLY_FAILED).
    expected = {"job-error": "apply-failed", "runner-error": "apply-failed"}.get(kind, kind)
    assert to_wire(again) == JobFailure(kind=expected, message="what the runner said")


def test_an_apply_failure_that_applied_nothing_is_a_runner_error_on_the_host() -> None:
    again = from_wire(JobFailure(kind="apply-failed", message="broke"), None)
    assert type(again) is RunnerError and to_wire(again).kind == "runner-error"


def test_a_stop_without_words_says_an_operator_cancelled_it() -> None:
    assert to_wire(ApplySliceEnded("", APPLIED)) == JobFailure(kind="stopped", message=STOPPED_MESSAGE)


def test_any_other_runner_error_is_named_by_whether_it_applied_anything() -> None:
    assert kind_of(StackBusy("another update runs", APPLIED)) == "apply-failed"
    assert kind_of(StackBusy("another update runs")) == "runner-error"


def test_a_tampered_result_is_the_hosts_own_kind_and_never_a_new_wire_kind() -> None:
    tampered = JobResultTampered("the result's digest differs", APPLIED)
    assert kind_of(tampered) == "job-result-tampered"
    assert "job-result-tampered" not in get_args(FailureKind)
    assert to_wire(tampered).kind == "apply-failed"


def test_the_reason_tables_name_every_kind() -> None:
    assert set(APPLY_ENDINGS) == set(KINDS)
    assert set(PLAN_REASONS) == set(KINDS) - {"secret-unresolvable"}  # a plan's secret failure is raised on


@pytest.mark.parametrize(("error", "kind"), RAISED_IN_THE_JOB, ids=lambda value: str(value)[:30])
def test_a_run_ends_the_same_whether_its_runner_failed_in_a_job_or_in_process(error: RunnerFailure, kind: str) -> None:
    in_a_job = from_wire(to_wire(error), applied_before(error))
    assert apply_failure(in_a_job) == apply_failure(error)
    if isinstance(error, RunnerError):
        assert isinstance(in_a_job, RunnerError) and plan_failure(in_a_job) == plan_failure(error)


@pytest.mark.parametrize(
    ("error", "applied", "reason", "detail"),
    [
        (ApplySliceEnded("stopped", APPLIED), APPLIED, FailureReason.APPLY_FAILED, "stopped"),
        (TargetUnreachable("down", APPLIED), APPLIED, FailureReason.TARGET_UNREACHABLE, "down"),
        (
            PlanNoLongerHolds("a changed", APPLIED),
            None,  # nothing unreviewed was applied: the receipt lists nothing
            FailureReason.APPLY_FAILED,
            "the plan no longer holds (a changed); declare again for a new plan",
        ),
        (SecretUnresolvable("forbidden"), None, FailureReason.APPLY_FAILED, "forbidden"),
        (ApplyFailed("b failed", APPLIED), APPLIED, FailureReason.APPLY_FAILED, "b failed"),
        (RunnerError("no program"), None, FailureReason.APPLY_FAILED, "no program"),
        (JobResultTampered("digest", APPLIED), APPLIED, FailureReason.JOB_RESULT_TAMPERED, "digest"),
    ],
    ids=lambda value: str(value)[:30],
)
def test_an_apply_ends_with_the_reason_and_receipt_of_its_kind(
    error: RunnerFailure, applied: ApplyResult | None, reason: FailureReason, detail: str
) -> None:
    assert apply_failure(error) == (applied, (reason, detail))


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (TargetUnreachable("down"), FailureReason.TARGET_UNREACHABLE),
        (JobResultTampered("digest"), FailureReason.JOB_RESULT_TAMPERED),
        (PlanNoLongerHolds("a changed"), FailureReason.PLAN_FAILED),
        (RunnerError("no program"), FailureReason.PLAN_FAILED),
        (ApplySliceEnded("stopped"), FailureReason.PLAN_FAILED),
    ],
    ids=lambda value: str(value)[:30],
)
def test_a_plan_ends_with_the_reason_of_its_kind(error: RunnerError, reason: FailureReason) -> None:
    assert plan_failure(error) == (reason, str(error))
