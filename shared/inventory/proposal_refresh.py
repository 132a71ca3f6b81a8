"""Each scan brings the environment's proposals in line with its findings.

A proposal is a view of drift that is still there, so every scan (that
compares) refreshes the open one:

- findings that resolved (fixed by hand) or became suppressed (an ignore
  rule) leave it; suppressed ones come back as new members if their rule
  expires while drift remains;
- new drift joins it (or raises a new proposal when none is open);
- its options are recomputed from its members and the environment's other
  open findings: the adopt diff shows only what is still drift, and what a
  run would keep as observed is listed as ``kept``;
- a proposal with nothing left resolves; one measured against a
  specification that is no longer the applied one is superseded.

The proposal row is rewritten only when its members or options changed, so a
steady environment costs no writes. Pure apart from reading the proposals and
saving the specifications its options name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.desired_state.api import EnvironmentSpecification
from shared.inventory import events
from shared.inventory.adoption import Declared, NotAdoptable, declared_specification
from shared.inventory.findings import Finding
from shared.inventory.proposals import (
    Options,
    Proposal,
    ProposalState,
    Supersession,
    accept_option,
    new_proposal_id,
    revert_option,
    summarize,
)
from shared.inventory.settings import InventorySettings
from shared.inventory.store import InventoryStore, Versioned
from shared.provisioning.api import AppliedEnvironment, ProvisioningApi

# Findings of a proposal closed without a decision are proposed again; those of a rejected one are not.
CLOSED_UNDECIDED = (ProposalState.SUPERSEDED, ProposalState.RESOLVED)


@dataclass
class Refresh:
    """Proposal rows to write (with their ETags), events to emit, the open proposal's id."""

    writes: list[tuple[Proposal, str | None]] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    proposal_id: str | None = None


class ProposalRefresher:
    def __init__(self, store: InventoryStore, provisioning: ProvisioningApi, settings: InventorySettings) -> None:
        self._store = store
        self._provisioning = provisioning
        self._settings = settings

    def refresh(self, applied: AppliedEnvironment, still_open: list[Finding], now: datetime) -> Refresh:
        """Sets each finding's ``proposal_id`` (the caller writes the findings) and says what else to write."""
        stamp = now.isoformat()
        result = Refresh()
        current, states = self._current(applied, stamp, result)
        for finding in still_open:
            if finding.proposal_id and _leaves(finding, states.get(finding.proposal_id)):
                finding.proposal_id = None  # proposed again (if active) below, or when its rule ends
        unattached = [f for f in still_open if f.active and f.proposal_id is None]
        if current is None and not unattached:
            return result
        proposal, etag = (current.value, current.etag) if current else (self._new(applied, stamp), None)
        for finding in unattached:
            finding.proposal_id = proposal.id
        members = [f for f in still_open if f.active and f.proposal_id == proposal.id]
        if not members:
            result.writes.append(
                (
                    proposal.model_copy(
                        update={"state": ProposalState.RESOLVED, "resolved_at": stamp, "updated_at": stamp}
                    ),
                    etag,
                )
            )
            return result
        options, specifications = self.options(applied, members, still_open)
        refreshed = proposal.model_copy(
            update={
                "finding_ids": [f.id for f in members],
                "findings": [summarize(f) for f in members],
                "options": options,
                "updated_at": stamp,
            }
        )
        result.proposal_id = proposal.id
        if etag is not None and _same(refreshed, proposal):
            return result
        for specification in specifications:
            self._provisioning.save_specification(specification)
        if etag is None:
            self._store.index_proposal(refreshed)
            result.events.append(events.reconciliation_proposed(refreshed))
        result.writes.append((refreshed, etag))
        return result

    def options(
        self, applied: AppliedEnvironment, members: list[Finding], open_findings: list[Finding]
    ) -> tuple[Options, list[EnvironmentSpecification]]:
        """The three options for ``members``, and the specifications they would declare."""
        requires = self._provisioning.requires_approval(applied.environment_class)
        specifications: list[EnvironmentSpecification] = []
        revert: dict[str, Any]
        adopt: dict[str, Any]
        try:
            declared = declared_specification(applied.specification, open_findings, {f.id: "revert" for f in members})
            unchanged = declared.specification is applied.specification  # stored already; spare hashing it
            digest = applied.digest if unchanged else declared.specification.digest()
            specifications += [] if unchanged else [declared.specification]
            revert = {**revert_option(digest, applied.environment_class, requires), **_kept(declared)}
        except NotAdoptable as error:
            revert = {"available": False, "reason": str(error)}
        try:
            declared = declared_specification(applied.specification, open_findings, {f.id: "adopt" for f in members})
            specifications.append(declared.specification)
            adopt = {
                "available": True,
                "specification_digest": declared.specification.digest(),
                "requires_approval": requires,
                "diff": _dump(declared.diff),
                **_kept(declared),
                "description": "declare the specification changed as the diff shows, so desired state "
                "matches what is observed",
            }
        except NotAdoptable as error:
            adopt = {"available": False, "reason": str(error)}
        accept = accept_option(self._settings.default_ignore_days)
        return Options(revert=revert, adopt=adopt, accept=accept), specifications

    # -- steps -----------------------------------------------------------------------------------

    def _current(
        self, applied: AppliedEnvironment, stamp: str, result: Refresh
    ) -> tuple[Versioned[Proposal] | None, dict[str, ProposalState]]:
        """The open proposal still measured against the applied state; every proposal's state by id."""
        current: Versioned[Proposal] | None = None
        states: dict[str, ProposalState] = {}
        for versioned in self._store.proposals(applied.tenant, applied.environment):
            proposal: Proposal = versioned.value
            states[proposal.id] = proposal.state
            if proposal.state is not ProposalState.OPEN:
                continue
            if proposal.basis_digest != applied.digest or (
                applied.run_id and proposal.basis_run_id and proposal.basis_run_id != applied.run_id
            ):
                result.writes.append((superseded(proposal, applied, stamp), versioned.etag))
                states[proposal.id] = ProposalState.SUPERSEDED
            elif current is None:
                current = versioned
        return current, states

    @staticmethod
    def _new(applied: AppliedEnvironment, stamp: str) -> Proposal:
        return Proposal(
            id=new_proposal_id(),
            tenant=applied.tenant,
            environment=applied.environment,
            created_at=stamp,
            updated_at=stamp,
            finding_ids=[],
            basis_digest=applied.digest,
            basis_run_id=applied.run_id,
            environment_class=applied.environment_class,
            options=Options(revert={}, adopt={}, accept={}),
        )


def superseded(proposal: Proposal, applied: AppliedEnvironment, stamp: str) -> Proposal:
    return proposal.model_copy(
        update={
            "state": ProposalState.SUPERSEDED,
            "updated_at": stamp,
            "superseded_by": Supersession(run_id=applied.run_id or "", specification_digest=applied.digest, at=stamp),
        }
    )


def _leaves(finding: Finding, state: ProposalState | None) -> bool:
    """Does the finding leave its proposal? Yes if that was closed undecided (or is gone); a suppressed
    one also leaves an open proposal, or an accepted one (whose rules it may outlive). A rejected
    proposal keeps its findings: the operator said the drift is intended."""
    if state is None or state in CLOSED_UNDECIDED:
        return True
    return not finding.active and state in (ProposalState.OPEN, ProposalState.ACCEPTED)


def _same(refreshed: Proposal, stored: Proposal) -> bool:
    return (
        refreshed.finding_ids == stored.finding_ids
        and refreshed.findings == stored.findings
        and refreshed.options.model_dump(mode="json") == stored.options.model_dump(mode="json")
    )


def _kept(declared: Declared) -> dict[str, Any]:
    return {"kept": _dump(declared.kept)} if declared.kept else {}


def _dump(changes: list[Any]) -> list[dict[str, Any]]:
    return [change.model_dump(mode="json") for change in changes]
