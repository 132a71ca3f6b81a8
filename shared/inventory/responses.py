"""The inventory's answers: environments, observed state, scans, findings, ignore rules, proposals."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from shared.desired_state.api import NAME_PATTERN
from shared.inventory.findings import Finding
from shared.inventory.ignore_rules import IgnoreRule
from shared.inventory.proposals import Proposal, ProposalState
from shared.platform.http.contract import view_of
from shared.platform.http.paging import PageInfo, PageQuery
from shared.provisioning.api import RunState

FindingView = view_of(Finding, "FindingView", exclude=("tenant",), suppressed=(bool, ...))
IgnoreRuleView = view_of(IgnoreRule, "IgnoreRuleView", exclude=("tenant",), active=(bool, ...))
ProposalView = view_of(
    Proposal,
    "ProposalView",
    exclude=("tenant",),
    note=(str | None, Field(default=None, description="why a superseded proposal is")),
    answered=(bool, Field(default=False, description="superseded by a run of exactly its adopt specification")),
)


class AppliedState(BaseModel):
    specification_digest: str
    run_id: str | None


class ObservationView(BaseModel):
    status: str
    fresh: bool
    observed_at: str | None
    last_attempt_at: str | None
    error: str | None
    observer: str | None
    target: str | None
    resource_count: int | None
    last_scan_note: str | None
    notes: list[Any] | None = Field(default=None, description="in an environment's inventory only")


class EnvironmentSummary(BaseModel):
    environment: str
    environment_class: str | None
    applied: AppliedState | None
    observation: ObservationView
    open_findings: int
    suppressed_findings: int


class EnvironmentList(PageInfo):
    environments: list[EnvironmentSummary]


class InventoryView(EnvironmentSummary):
    resources: list[dict[str, Any]]
    findings: list[FindingView]  # type: ignore[valid-type]
    suppressed: list[FindingView]  # type: ignore[valid-type]


class ScanOutcome(BaseModel):
    scan_id: str | None = None
    environment: str
    status: str
    compared: bool
    observed_at: str | None
    error: str | None
    note: str
    opened_findings: list[str]
    resolved_findings: list[str]
    open_findings: int
    suppressed_findings: int
    proposal_id: str | None


class ScanView(BaseModel):
    scan_id: str
    environment: str
    state: Literal["running", "completed", "refused", "failed"]
    status_url: str
    outcome: ScanOutcome | None = None
    problem: str | None = None
    detail: str | None = None


class FindingList(PageInfo):
    environment: str
    findings: list[FindingView]  # type: ignore[valid-type]


class IgnoreRuleList(PageInfo):
    environment: str
    ignore_rules: list[IgnoreRuleView]  # type: ignore[valid-type]


class ProposalList(PageInfo):
    proposals: list[ProposalView]  # type: ignore[valid-type]


class StartedRun(BaseModel):
    run_id: str
    state: RunState
    status_url: str


class AcceptedProposal(ProposalView):  # type: ignore[valid-type, misc]
    run: StartedRun | None = Field(default=None, description="the provisioning run a revert or adopt started")


class FindingsQuery(PageQuery):
    """Findings in finding id order."""

    state: Literal["open", "suppressed", "resolved", "all"] | None = Field(default=None, description="default open")


class ProposalsQuery(PageQuery):
    """Proposals by environment, then proposal id."""

    environment: str | None = Field(default=None, pattern=NAME_PATTERN)
    state: ProposalState | None = None


class EnvironmentsQuery(PageQuery):
    """Environments in name order."""


class IgnoreRulesQuery(PageQuery):
    """Ignore rules in rule id order."""
