"""Accepting and rejecting proposals (role Operator; the HTTP trigger checks it).

Accepting ``revert`` or ``adopt`` declares a specification through the
provisioning service, so the repair is a run like any other: planned,
approved where the environment class requires it (and never by the operator
who accepted, since they requested it), applied, with receipts. The run's id
is derived from the proposal and the option, so the decision is recorded
*before* the declaration and a retried request (or one that crashed between
the two) declares the same run again instead of a second one.

Accepting ``accept`` writes one ignore rule per finding, in the same batch
as the decision.

A proposal measured against a specification that is no longer the applied
one is superseded: accepting it answers 409 and marks it so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.errors import AlreadyExists, ConcurrencyConflict, InvalidInput, NotFound
from shared.inventory import events
from shared.inventory.errors import OptionUnavailable, ProposalClosed, ProposalSuperseded
from shared.inventory.expected import applied_state
from shared.inventory.findings import Finding
from shared.inventory.ignore_rules import IgnoreRule, NewIgnoreRule, new_rule
from shared.inventory.model import FindingKind
from shared.inventory.proposals import Proposal, ProposalDecision, ProposalState, Supersession
from shared.inventory.store import InventoryStore, Versioned
from shared.provisioning.runs import Run, SourceInfo, run_id_for
from shared.provisioning.service import ProvisioningService
from shared.provisioning.specification import EnvironmentSpecification
from shared.provisioning.store import ProvisioningStore
from shared.storage.streams import optimistic
from shared.settings import Settings


class AcceptBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    option: Literal["revert", "adopt", "accept"]
    reason: str = Field(default="", max_length=2000)
    expires_at: datetime | None = Field(default=None, description="for option accept: when the ignore rules end")


class RejectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=2000)


@dataclass
class Accepted:
    proposal: Proposal
    run: Run | None = None
    run_created: bool = False


class ProposalDecisions:
    def __init__(self, store: InventoryStore, provisioning: ProvisioningStore, service: ProvisioningService,
                 settings: Settings) -> None:
        self._store = store
        self._provisioning = provisioning
        self._service = service
        self._settings = settings

    def accept(self, tenant: str, proposal_id: str, body: AcceptBody, operator: str) -> Accepted:
        for attempt in optimistic():
            with attempt:
                versioned = self._open(tenant, proposal_id, body.option)
                proposal = versioned.value
                if proposal.state is ProposalState.ACCEPTED:  # the same request again
                    return self._declare(proposal)
                specification = self._specification_for(proposal, body.option)
                now = datetime.now(timezone.utc)
                decision = ProposalDecision(option=body.option, by=operator, at=now.isoformat(), reason=body.reason)
                rules: list[IgnoreRule] = []
                if specification is not None:
                    decision.run_id = run_id_for(tenant, _key(proposal, body.option))
                    decision.specification_digest = specification.digest()
                else:
                    rules = self._rules_for(proposal, body, operator, now)
                    decision.ignore_rule_ids = [rule.id for rule in rules]
                accepted = proposal.model_copy(update={"state": ProposalState.ACCEPTED, "decision": decision,
                                                       "updated_at": now.isoformat()})
                operations = [self._store.proposal_operation(accepted, versioned.etag),
                              *(self._store.rule_operation(rule) for rule in rules)]
                self._commit(accepted, operations, events.proposal_accepted(accepted))
                return self._declare(accepted)
        raise AssertionError("unreachable")

    def reject(self, tenant: str, proposal_id: str, body: RejectBody, operator: str) -> Proposal:
        for attempt in optimistic():
            with attempt:
                versioned = self._found(tenant, proposal_id)
                proposal = versioned.value
                if proposal.state is not ProposalState.OPEN:
                    raise ProposalClosed(proposal.id, proposal.state.value)
                now = datetime.now(timezone.utc).isoformat()
                rejected = proposal.model_copy(update={
                    "state": ProposalState.REJECTED, "updated_at": now,
                    "decision": ProposalDecision(by=operator, at=now, reason=body.reason)})
                self._commit(rejected, [self._store.proposal_operation(rejected, versioned.etag)],
                             events.proposal_rejected(rejected))
                return rejected
        raise AssertionError("unreachable")

    # -- steps -----------------------------------------------------------------------------------

    def _found(self, tenant: str, proposal_id: str) -> Versioned:
        versioned = self._store.proposal(tenant, proposal_id)
        if versioned is None:
            raise NotFound(f"proposal {proposal_id}")
        return versioned

    def _open(self, tenant: str, proposal_id: str, option: str) -> Versioned:
        """The proposal, open and still measured against the applied state (or accepted with this option)."""
        versioned = self._found(tenant, proposal_id)
        proposal: Proposal = versioned.value
        if proposal.state is ProposalState.ACCEPTED and proposal.decision and proposal.decision.option == option:
            return versioned
        if proposal.state is not ProposalState.OPEN:
            note = f" ({proposal.public_view()['note']})" if proposal.superseded_by else ""
            raise ProposalClosed(proposal.id, proposal.state.value, note)
        applied = applied_state(self._provisioning, tenant, proposal.environment)
        if applied is None or applied.digest != proposal.basis_digest or (
                proposal.basis_run_id and applied.run_id and applied.run_id != proposal.basis_run_id):
            now = datetime.now(timezone.utc).isoformat()
            run_id, digest = (applied.run_id or "", applied.digest) if applied else ("", "")
            superseded = proposal.model_copy(update={
                "state": ProposalState.SUPERSEDED, "updated_at": now,
                "superseded_by": Supersession(run_id=run_id, specification_digest=digest, at=now)})
            self._commit(superseded, [self._store.proposal_operation(superseded, versioned.etag)], None)
            raise ProposalSuperseded(proposal.id, f"run {run_id} applied a newer specification of "
                                                  f"{proposal.environment}; scan again for a current proposal")
        return versioned

    def _specification_for(self, proposal: Proposal, option: str) -> EnvironmentSpecification | None:
        if option == "accept":
            return None
        chosen = getattr(proposal.options, option)
        if not chosen.get("available"):
            raise OptionUnavailable(option, chosen.get("reason", "not offered for this drift"))
        specification = self._provisioning.load_specification(proposal.tenant, proposal.environment,
                                                              chosen["specification_digest"])
        if self._settings.target(specification.target) is None:
            raise OptionUnavailable(option, f"target {specification.target} is no longer configured")
        return specification

    def _rules_for(self, proposal: Proposal, body: AcceptBody, operator: str, now: datetime) -> list[IgnoreRule]:
        inventory = self._settings.runtime_cloud.inventory
        findings = [f for f in (self._store.finding(proposal.tenant, proposal.environment, fid)
                                for fid in proposal.finding_ids) if f is not None]
        reason = body.reason or f"accepted drift of proposal {proposal.id}"
        try:
            return [new_rule(proposal.tenant, proposal.environment, request, operator, now,
                             inventory.default_ignore_days, inventory.max_ignore_days, proposal.id)
                    for finding in findings for request in _rule_requests(finding, reason, body.expires_at)]
        except ValueError as error:
            raise InvalidInput([{"path": "/expires_at", "message": str(error)}]) from None

    def _declare(self, proposal: Proposal) -> Accepted:
        decision = proposal.decision
        if decision is None or decision.option == "accept" or not decision.specification_digest:
            return Accepted(proposal)
        specification = self._provisioning.load_specification(proposal.tenant, proposal.environment,
                                                              decision.specification_digest)
        source = SourceInfo(kind="proposal", path=f"proposals/{proposal.id}/{decision.option}")
        run, created = self._service.declare(specification, source, _key(proposal, decision.option or ""),
                                             decision.by)
        return Accepted(proposal, run, created)

    def _commit(self, proposal: Proposal, operations: list, event: object) -> None:
        try:
            self._store.commit(proposal.tenant, proposal.environment, operations, [event] if event else [])
        except AlreadyExists:
            raise ConcurrencyConflict(f"proposal {proposal.id} changed concurrently") from None


def _key(proposal: Proposal, option: str) -> str:
    """The idempotency key of the run an option declares (the inbox recognises it by the proposal id)."""
    return f"{proposal.id}:{option}"


def _rule_requests(finding: Finding, reason: str, expires_at: datetime | None) -> list[NewIgnoreRule]:
    if finding.kind is FindingKind.CHANGED and finding.fields:
        return [NewIgnoreRule(resource=finding.address, field=f.path, reason=reason, expires_at=expires_at)
                for f in finding.fields]
    return [NewIgnoreRule(resource=finding.address, reason=reason, expires_at=expires_at)]
