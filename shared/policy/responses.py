"""The policy gate's answers: the effective policy of an environment, a dry run's verdict, exceptions."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from shared.iac.api import PlanCounts
from shared.platform.http.contract import view_of
from shared.platform.http.paging import PageInfo, PageQuery
from shared.policy.exceptions import PolicyException
from shared.policy.verdict import PolicySummary, PolicyVerdict

PolicyExceptionView = view_of(
    PolicyException, "PolicyExceptionView", exclude=("tenant",), active=(bool, Field(description="in force now"))
)


class PolicyExceptionList(PageInfo):
    exceptions: list[PolicyExceptionView]  # type: ignore[valid-type]


class PolicyLayerView(BaseModel):
    path: str = Field(description="the layer's place in the bundle tree, e.g. installation.yaml")
    digest: str = Field(description="SHA-256 of the layer's text")
    bundle: dict[str, Any]


class EffectivePolicy(BaseModel):
    """The rules that check this environment's plans now, with the exceptions in force."""

    environment: str
    environment_class: str
    source: str = Field(description="none (no gate), files or http (GovernanceHost)")
    bundle_digest: str | None = Field(description="what a plan receipt records; null when no gate is configured")
    layers: list[PolicyLayerView]
    exceptions: list[PolicyExceptionView]  # type: ignore[valid-type]


class DryRunVerdict(BaseModel):
    """A specification checked against the effective policy: nothing was declared, planned for keeps or written."""

    environment: str
    environment_class: str
    plan_counts: PlanCounts
    requires_approval: bool = Field(description="whether a run of it would wait for an operator (if allowed)")
    summary: PolicySummary
    verdict: PolicyVerdict


class PolicyExceptionsQuery(PageQuery):
    """Exceptions in exception id order: active, expired and revoked alike."""
