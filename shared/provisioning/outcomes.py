"""What a run's steps answer its orchestration, as types instead of bare strings.

The orchestrator and the activities in :mod:`shared.provisioning.lifecycle`
exchange these through Durable's history, which stores JSON: each enum is a
``str`` enum (it serialises as its value and compares equal to it on replay),
and each answer a ``TypedDict`` (a plain dict at run time).
"""

from __future__ import annotations

from enum import Enum
from typing import NotRequired, TypedDict

from shared.provisioning.runner_jobs import JobTicket


class Claim(str, Enum):
    """``claim_environment``'s answer."""

    PROCEED = "proceed"  # the run holds its environment: plan
    WAIT = "wait"  # another run is active: wait to be woken (or recheck)
    SUPERSEDED = "superseded"  # a newer run of the environment is waiting: end superseded
    FINISHED = "finished"  # the run ended already (a replayed or restarted orchestration)
    CANCELLED = "cancelled"  # an operator cancelled it while it was queued


class Outcome(str, Enum):
    """How a step left the run: ``planned`` and ``continue`` go on, every other one ends it."""

    PLANNED = "planned"
    CONTINUE = "continue"  # one apply slice done: call the apply step again
    WAITING = "waiting"  # the step's runner job has not finished: ``job_state`` says whether it lives
    APPLIED = "applied"
    FAILED = "failed"
    CANCELLED = "cancelled"
    REJECTED = "rejected"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    FINISHED = "finished"  # the run had ended before this orchestration looked


class StepAnswer(TypedDict, total=False):
    """``plan``'s and ``apply``'s answer."""

    outcome: Outcome
    reason: str | None  # a FailureReason value, when the run failed or was cancelled
    detail: str
    plan_digest: str | None  # planned
    requires_approval: bool  # planned
    steps_done: int  # continue
    job_state: str  # waiting: "running" or "dead" (see shared.iac.jobs.liveness)
    apply_job: JobTicket  # planned without approval: the apply's runner job, launched by the plan step
    finished: bool  # apply: the step ended the run itself (no finish step needed)
    waiting_runs: list[str]  # finished: the runs queued behind this one, to wake


class ClaimAnswer(TypedDict):
    """``claim_and_start_plan``'s answer (a history from before holds the claim alone: a bare ``Claim``)."""

    claim: str  # a Claim's value
    # Once the run holds its environment: the plan's runner job, or the answer of a plan that could not start
    # (``failed``), or an empty ticket (no job: jobs off, or nothing to plan).
    plan_job: NotRequired[JobTicket | StepAnswer]
