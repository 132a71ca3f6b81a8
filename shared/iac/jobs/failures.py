"""The one converter between a runner's failures and their wire form (a job result's ``failure``).

A runner job reports what its runner raised as a :class:`~shared.iac.jobs.protocol.JobFailure`
(``kind`` and ``message``, with what was applied before it in the result's ``apply``); the host
raises the same exception again from it, so a run ends exactly as an in-process apply would have
ended; provisioning then turns the exception into the run's failure reason (its table,
``shared/provisioning/failure_reasons.py``, is keyed by the kinds named here). One table below
says, for each kind, which exception it is; nothing else translates a runner failure.

The kinds, in the order an exception is matched (subclasses before :class:`RunnerError`):

========================  ==========================================  =================================
kind                      exception                                   applied before it
========================  ==========================================  =================================
``stopped``               :class:`ApplySliceEnded` (an operator's     ``result``
                          cancel reached the job)
``target-unreachable``    :class:`TargetUnreachable`                  ``result``
``plan-no-longer-holds``  :class:`PlanNoLongerHolds`                  ``result``
``secret-unresolvable``   :class:`SecretUnresolvable`                 nothing
``apply-failed``          :class:`ApplyFailed` (any RunnerError       ``result`` (never None)
                          that carries a result)
``runner-error``          :class:`RunnerError` without a result       nothing
``job-error``             (the job itself failed: its input           nothing; the host raises
                          unreadable or tampered)                     :class:`RunnerError`
========================  ==========================================  =================================

:class:`JobResultTampered` is the host's own (a result that fails its digests) and never crosses
the wire; :func:`kind_of` names it ``job-result-tampered`` so that the reason table has every kind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

from shared.iac.jobs.protocol import FailureKind, JobFailure
from shared.iac.jobs.results import JobResultTampered
from shared.iac.model import (
    ApplyFailed,
    ApplyResult,
    ApplySliceEnded,
    PlanNoLongerHolds,
    RunnerError,
    SecretUnresolvable,
    TargetUnreachable,
)

RunnerFailure = RunnerError | SecretUnresolvable
# Every kind a runner failure can have on the host: the wire's, and the host's own.
HostKind = Literal["job-result-tampered"]
Kind = FailureKind | HostKind

WIRE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)
KINDS: tuple[Kind, ...] = (*WIRE_KINDS, *get_args(HostKind))

# The message a stop carries when the runner gave none.
STOPPED_MESSAGE = "cancelled by an operator"

# Exception type -> kind, in matching order (a subclass before its base).
_TYPED_KINDS: tuple[tuple[type[Exception], Kind], ...] = (
    (JobResultTampered, "job-result-tampered"),
    (ApplySliceEnded, "stopped"),
    (TargetUnreachable, "target-unreachable"),
    (PlanNoLongerHolds, "plan-no-longer-holds"),
    (SecretUnresolvable, "secret-unresolvable"),
)

# Wire kind -> the exception the host raises again, given the message and what was applied.
_RAISED: dict[FailureKind, Callable[[str, ApplyResult | None], Exception]] = {
    "stopped": lambda message, applied: ApplySliceEnded(message, applied),
    "target-unreachable": lambda message, applied: TargetUnreachable(message, applied),
    "plan-no-longer-holds": lambda message, applied: PlanNoLongerHolds(message, applied),
    "secret-unresolvable": lambda message, _: SecretUnresolvable(message),
    "apply-failed": lambda message, applied: ApplyFailed(message, applied) if applied else RunnerError(message),
    "runner-error": lambda message, applied: RunnerError(message, applied),
    "job-error": lambda message, applied: RunnerError(message, applied),
}


def kind_of(error: RunnerFailure) -> Kind:
    """The failure's kind: its type's, else ``apply-failed`` when steps were applied before it."""
    for error_type, kind in _TYPED_KINDS:
        if isinstance(error, error_type):
            return kind
    return "apply-failed" if applied_before(error) is not None else "runner-error"


def applied_before(error: RunnerFailure) -> ApplyResult | None:
    """What was applied before the failure (a secret that did not resolve stopped before any step)."""
    return error.result if isinstance(error, RunnerError) else None


def to_wire(error: RunnerFailure) -> JobFailure:
    """What the job reports for the exception its runner raised (what was applied goes beside it)."""
    kind = kind_of(error)
    if kind == "job-result-tampered":  # the host's own: a job never raises it, and says no more than this
        kind = "apply-failed" if applied_before(error) is not None else "runner-error"
    message = str(error) or (STOPPED_MESSAGE if kind == "stopped" else "")
    return JobFailure(kind=kind, message=message)


def from_wire(failure: JobFailure, applied: ApplyResult | None) -> Exception:
    """The exception the runner raised in the job, raised again on the host with what was applied."""
    return _RAISED[failure.kind](failure.message, applied)
