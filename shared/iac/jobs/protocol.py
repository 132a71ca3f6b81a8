"""The documents of the runner-job protocol (see :mod:`shared.iac.jobs`).

A :class:`JobRequest` is the queue message: small (well under the 64 KiB a
queue message may hold) because everything that grows with an environment --
the specification, the reviewed plan, the results -- goes by reference to a
blob with its digest. Secrets never enter a document: the input names the
specification's secret references and the job resolves them with its own
identity.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field

from shared.iac.model import ApplyResult, PlanResult
from shared.platform.targets import ProvisioningTarget


class JobKind(str, Enum):
    PLAN = "plan"
    APPLY = "apply"


def job_id_for(run_id: str, kind: JobKind, attempt: int) -> str:
    return f"{run_id}-{kind.value}-{attempt}"


class JobRequest(BaseModel):
    """The message on the job queue: which job, and where its input is (with its digest)."""

    job_id: str
    tenant: str
    environment: str
    run_id: str
    kind: JobKind
    attempt: int = Field(ge=1)
    input_blob: str
    input_sha256: str
    results_queue: str  # where the job sends its completion notice (the launching app's setting)
    # W3C trace context of the step that launched it: the job's spans join the run's trace.
    traceparent: str | None = Field(default=None, max_length=128)
    tracestate: str | None = Field(default=None, max_length=512)


class JobInput(BaseModel):
    """What the job runs: the specification, its target, for apply the reviewed plan and the configuration.

    ``configuration`` holds the Config Platform's resolved (non-secret) values;
    ``configuration_resolved``/``unresolved``/``note`` say what the receipt records about them.
    """

    job_id: str
    kind: JobKind
    tenant: str
    environment: str
    run_id: str
    attempt: int
    specification: dict[str, Any]
    target: ProvisioningTarget
    plan: PlanResult | None = None
    configuration: dict[str, str] = Field(default_factory=dict)
    configuration_resolved: list[str] = Field(default_factory=list)
    configuration_unresolved: list[str] = Field(default_factory=list)
    configuration_note: str = ""
    heartbeat_seconds: float = 10.0
    # A plan whose run needs no approval: how long the job waits, once its plan is handed over, for the
    # host's go (the apply's request, run in this execution) or stop (see :mod:`.handover`). 0: it ends.
    handover_seconds: float = 0.0
    # The launching app's ``RuntimeCloud:IaC`` settings (no secrets: names and paces), so a job runs the
    # same whichever scaler or replica executes it.
    iac: dict[str, Any] = Field(default_factory=dict)


FailureKind = Literal[
    "target-unreachable",  # the target did not answer (from apply: ``result`` has what was done)
    "plan-no-longer-holds",  # the target changed since the plan: nothing unreviewed was applied
    "secret-unresolvable",  # a secret reference could not be resolved with the runner's identity
    "stopped",  # an operator's cancel reached the job: it stopped between two steps
    "apply-failed",  # a step failed; ``result`` has what was done before it
    "runner-error",  # any other failure the runner reported
    "job-error",  # the job itself failed (its input unreadable, an unexpected error); nothing is named
]


class JobFailure(BaseModel):
    kind: FailureKind
    message: str


class JobResult(BaseModel):
    """What the job answers: a plan, an apply result, or a failure (with what was applied before it).

    Digests: the job's row records this document's (``ResultSha256``); this document records its log's
    (``events_sha256``), and a Pulumi plan's ``binding`` names its saved plan by digest; the outputs are
    in it. The host checks all of them before it receipts anything (:mod:`.results`)."""

    job_id: str
    kind: JobKind
    attempt: int
    plan: PlanResult | None = None
    apply: ApplyResult | None = None
    failure: JobFailure | None = None
    events_blob: str | None = None  # the job's log: engine events and log lines, one JSON object a line
    events_sha256: str | None = None  # the log's digest as the job wrote it (None: it wrote none)
    started_at: str
    finished_at: str


class JobNotice(BaseModel):
    """The completion message on :data:`RESULTS_QUEUE`: only wakes the run; the job's row is the truth."""

    job_id: str
    tenant: str
    environment: str
    run_id: str
    traceparent: str | None = Field(default=None, max_length=128)  # the run's trace, which the trigger continues
