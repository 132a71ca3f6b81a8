"""A runner failure's reason on the run, one table per step, keyed by the converter's kinds.

The kinds are :mod:`shared.iac.jobs.failures`'s (the one converter between a runner's exceptions
and a job's wire form); this is the other half of that translation, here because the reasons are
the run's (:class:`FailureReason`) and the IaC layer does not know runs. The same exception gives
the same reason whether the runner ran in a job or in the host's process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shared.iac.api import ApplyResult, Kind, RunnerError, RunnerFailure, applied_before, kind_of
from shared.provisioning.runs import FailureReason


@dataclass(frozen=True)
class Ending:
    """How an apply that failed with one kind ends: its reason, its detail, and whether its receipt
    lists what was applied before the failure."""

    reason: FailureReason
    detail: Callable[[str], str] = str
    keeps_applied: bool = True


# A plan that fails: the target did not answer, the job's result failed its digests, else the plan
# failed. (A secret that does not resolve is not a plan failure: it is raised on, as it always was.)
PLAN_REASONS: dict[Kind, FailureReason] = {
    "stopped": FailureReason.PLAN_FAILED,
    "target-unreachable": FailureReason.TARGET_UNREACHABLE,
    "plan-no-longer-holds": FailureReason.PLAN_FAILED,
    "apply-failed": FailureReason.PLAN_FAILED,
    "runner-error": FailureReason.PLAN_FAILED,
    "job-error": FailureReason.PLAN_FAILED,
    "job-result-tampered": FailureReason.JOB_RESULT_TAMPERED,
}

APPLY_ENDINGS: dict[Kind, Ending] = {
    "stopped": Ending(FailureReason.APPLY_FAILED),  # a job stops early only for a cancel; else a failure
    "target-unreachable": Ending(FailureReason.TARGET_UNREACHABLE),
    "plan-no-longer-holds": Ending(
        FailureReason.APPLY_FAILED,
        lambda message: f"the plan no longer holds ({message}); declare again for a new plan",
        keeps_applied=False,
    ),
    "secret-unresolvable": Ending(FailureReason.APPLY_FAILED, keeps_applied=False),
    "apply-failed": Ending(FailureReason.APPLY_FAILED),
    "runner-error": Ending(FailureReason.APPLY_FAILED),
    "job-error": Ending(FailureReason.APPLY_FAILED),
    "job-result-tampered": Ending(FailureReason.JOB_RESULT_TAMPERED),  # the journal's steps, none of the result
}


def plan_failure(error: RunnerError) -> tuple[FailureReason, str]:
    """The run's reason and detail for a plan that raised ``error``."""
    return PLAN_REASONS[kind_of(error)], str(error)


def apply_failure(error: RunnerFailure) -> tuple[ApplyResult | None, tuple[FailureReason, str]]:
    """What the apply receipt lists as applied, and the run's reason and detail, for ``error``."""
    ending = APPLY_ENDINGS[kind_of(error)]
    applied = applied_before(error) if ending.keeps_applied else None
    return applied, (ending.reason, ending.detail(str(error)))
