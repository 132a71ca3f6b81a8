"""Provisioning's HTTP models: its answers (runs, receipts, outputs, environment specifications, a run's
log), its queries and the bodies of a run's decisions."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.desired_state.api import NAME_PATTERN
from shared.platform.http.contract import view_of
from shared.platform.http.paging import PageInfo, PageQuery
from shared.provisioning.runs import Run, RunState

RunView = view_of(Run, "RunView", exclude=("ordinal",))


class RunList(PageInfo):
    runs: list[RunView]  # type: ignore[valid-type]


class RunAccepted(BaseModel):
    """A declaration was accepted: the run that carries it out (the same run for a retried request)."""

    run_id: str
    state: RunState
    status_url: str
    specification_digest: str


class ReceiptView(BaseModel):
    run_id: str
    kind: Literal["plan", "apply"]
    digest: str
    expected_digest: str
    verified: bool = Field(description="the stored receipt's digest is the one the run recorded")
    receipt: dict[str, Any]


class RunOutputs(BaseModel):
    run_id: str
    sha256: str
    count: int
    outputs: dict[str, Any]


class SpecificationRef(BaseModel):
    digest: str
    run_id: str | None
    specification: dict[str, Any] | None = Field(description="null when the declaration was invalid")


class EnvironmentRegistrationView(BaseModel):
    """What the environment registry holds: the class and target that count, whatever a specification says."""

    environment_class: str
    target: str
    registered_at: str
    registered_by: str
    registered_run_id: str
    updated_at: str | None
    updated_by: str | None
    updated_run_id: str | None


class EnvironmentSpecification(BaseModel):
    environment: str
    declared: SpecificationRef | None
    last_applied: SpecificationRef | None
    registration: EnvironmentRegistrationView | None = Field(
        default=None, description="the environment's registration (null: not registered yet)"
    )


class RunsQuery(PageQuery):
    """Runs by environment, then run id."""

    state: RunState | None = Field(default=None, description="only runs in this state")
    environment: str | None = Field(default=None, pattern=NAME_PATTERN, description="only this environment's runs")


class DecisionBody(BaseModel):
    """An operator's approval or rejection of the plan a run awaits approval for."""

    model_config = ConfigDict(extra="forbid")

    plan_digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    reason: str = Field(default="", max_length=2000)


class CancelBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=2000)


class RunLogQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cursor: str | None = Field(
        default=None, max_length=220, description="where the page starts: the previous page's `next` (none: the start)"
    )


class RunLogPage(BaseModel):
    run_id: str
    jobs: list[dict[str, Any]] = Field(description="the run's runner jobs as they ran: job_id, attempt, state")
    entries: list[dict[str, Any]] = Field(
        description="the page's log lines: job_id and either engine_event (as the engine sent it) or log"
    )
    next: str | None = Field(description="the cursor of the next page; at the end it stays put while the run goes on")
    complete: bool = Field(description="the run ended and every line was read")
