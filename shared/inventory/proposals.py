"""Reconciliation proposals: one reviewable answer per drift episode.

The inventory never repairs on its own. When a scan opens active findings
that no proposal covers yet, it raises one proposal for them (or adds them to
the environment's proposal that is still open), with three options:

- ``revert``: put the findings back as last applied. It becomes a
  provisioning run through the same plan -> approve -> apply path and the
  same approval rules (production still needs an operator's approval, and
  whoever accepted cannot also approve the run).
- ``adopt``: change the specification so that desired matches observed,
  shown as a per-resource diff; accepting declares that specification.
- ``accept``: keep the drift for now: one ignore rule per finding, with an
  expiry.

A run either option starts leaves every other open finding (one an ignore
rule suppresses, one of another proposal) as observed: the option lists it
under ``kept`` (see :mod:`shared.inventory.adoption`). An operator may also
decide per finding (revert one, adopt another, accept a third); the decision
then names every finding of the proposal.

The proposal follows the drift until someone decides: each scan refreshes it
(see :mod:`shared.inventory.proposal_refresh`).

States: ``open`` -> ``accepted`` | ``rejected`` | ``superseded`` (a newer
promotion of the environment was applied: the proposal was made against
desired state that is no longer current, and says which run replaced it) |
``resolved`` (the drift went away, or is all ignored, before anyone decided).
A superseded proposal whose replacing run declared exactly its adopt
specification (say, a commit to the file an environment follows) is shown as
``answered``: the drift was adopted, just not through the proposal.
"""

from __future__ import annotations

import uuid
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.inventory.findings import Finding


class ProposalState(str, Enum):
    OPEN = "open"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    SUPERSEDED = "superseded"
    RESOLVED = "resolved"


OptionName = Literal["revert", "adopt", "accept"]


class AdoptedChange(BaseModel):
    """One resource of the adopt diff: how the specification would change."""

    address: str
    action: Literal["add", "update", "remove"]
    fields: list[dict[str, Any]] = Field(default_factory=list)  # path, before (declared), after (adopted)


class Options(BaseModel):
    revert: dict[str, Any]
    adopt: dict[str, Any]
    accept: dict[str, Any]


class ProposalDecision(BaseModel):
    option: OptionName | None = None  # the whole proposal's option; None when decided per finding
    findings: dict[str, OptionName] = Field(default_factory=dict, description="each finding's option")
    by: str  # the operator: a person (oid, else sub)
    client: str | None = None  # the client application they decided through
    at: str
    reason: str = ""
    run_id: str | None = None
    specification_digest: str | None = None
    ignore_rule_ids: list[str] = Field(default_factory=list)


class Supersession(BaseModel):
    run_id: str
    specification_digest: str
    at: str


class Proposal(BaseModel):
    model_config = ConfigDict(validate_assignment=True)

    id: str
    tenant: str
    environment: str
    state: ProposalState = ProposalState.OPEN
    created_at: str
    updated_at: str
    finding_ids: list[str]
    findings: list[dict[str, Any]] = Field(default_factory=list, description="a summary of each finding")
    basis_digest: str = Field(description="the applied specification the drift was measured against")
    basis_run_id: str | None = None
    environment_class: str = "non-production"
    options: Options
    decision: ProposalDecision | None = None
    superseded_by: Supersession | None = None
    resolved_at: str | None = None

    def public_view(self) -> dict[str, Any]:
        view = self.model_dump(mode="json", exclude={"tenant"})
        view["answered"] = self.answered
        if self.superseded_by is not None:
            view["note"] = (
                f"superseded: run {self.superseded_by.run_id} applied a newer specification "
                f"({self.superseded_by.specification_digest[:12]}) of this environment"
            )
            if self.answered:
                view["note"] = f"answered: run {self.superseded_by.run_id} applied the adopted specification"
        return view

    @property
    def answered(self) -> bool:
        """Superseded by a run of exactly the specification ``adopt`` would have declared."""
        adopted = self.options.adopt.get("specification_digest")
        return self.superseded_by is not None and adopted == self.superseded_by.specification_digest


def summarize(finding: Finding) -> dict[str, Any]:
    return {
        "id": finding.id,
        "kind": finding.kind.value,
        "address": finding.address,
        "fields": [f.model_dump(mode="json") for f in finding.fields],
    }


def new_proposal_id() -> str:
    return f"prp-{uuid.uuid4().hex[:20]}"


def revert_option(digest: str, environment_class: str, approval_required: bool) -> dict[str, Any]:
    note = (
        "a provisioning run that puts these findings back as last applied (drift listed under kept "
        "stays as it is); "
        + (
            "an operator other than the one accepting must approve its plan"
            if approval_required
            else "it applies without approval in this environment class"
        )
    )
    return {
        "available": True,
        "specification_digest": digest,
        "requires_approval": approval_required,
        "description": note,
    }


def accept_option(default_days: int) -> dict[str, Any]:
    return {
        "available": True,
        "default_expiry_days": default_days,
        "description": "one ignore rule per finding (scoped to the resource and, for changed fields, the "
        "field), expiring; the drift is shown again when they expire",
    }
