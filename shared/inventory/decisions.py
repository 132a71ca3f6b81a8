"""Accepting and rejecting proposals (role Operator; the HTTP trigger checks it).

Two ways to accept, both compatible with each other:

- ``{"option": "revert" | "adopt" | "accept"}`` decides the whole proposal;
- ``{"decisions": [{"finding": id, "option": ...}, ...]}`` decides each
  finding, and names every open finding of the proposal: a run applies a
  whole specification, so a finding left out would be decided by it anyway.

Findings decided ``revert`` or ``adopt`` are declared in one specification
(see :mod:`shared.inventory.adoption`: every other open finding, such as one
an ignore rule suppresses, is kept as observed) through the provisioning
service, so the repair is a run like any other: planned, approved where the
environment class requires it (and never by the operator who accepted, since
they requested it), applied, with receipts. The run's id is derived from the
proposal and the decision, so the decision is recorded *before* the
declaration and a retried request (or one that crashed between the two)
declares the same run again instead of a second one.

Findings decided ``accept`` get ignore rules, in the same batch as the
decision; only findings still open and not already suppressed get one.

A proposal measured against a specification that is no longer the applied
one is superseded: accepting it answers 409 and marks it so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared.desired_state.api import EnvironmentSpecification
from shared.inventory import events
from shared.inventory.adoption import NotAdoptable, declared_specification
from shared.inventory.errors import OptionUnavailable, ProposalClosed, ProposalSuperseded
from shared.inventory.findings import Finding, FindingState
from shared.inventory.ignore_rules import IgnoreRule, NewIgnoreRule, new_rule
from shared.inventory.model import FindingKind
from shared.inventory.proposals import OptionName, Proposal, ProposalDecision, ProposalState, Supersession
from shared.inventory.settings import InventorySettings
from shared.inventory.store import InventoryStore, Versioned
from shared.platform import clock
from shared.platform.auth.principal import PrincipalKind, Requester
from shared.platform.errors import AlreadyExists, ConcurrencyConflict, FieldError, InvalidInput, NotFound
from shared.platform.events.cloudevents import NewEvent
from shared.platform.events.outbox import TransactionOperation
from shared.platform.json_types import JsonTyped, exactly_one_of, one_given
from shared.platform.storage.optimistic import on_conflict
from shared.platform.targets import ProvisioningTarget, target_for
from shared.provisioning.api import ProvisioningApi, Run, SourceInfo, run_id_for


class FindingDecision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    finding: str = Field(min_length=1, max_length=64)
    option: OptionName


class AcceptBody(JsonTyped):
    """Exactly one of ``option`` (the whole proposal) and ``decisions`` (each finding)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=exactly_one_of("option", "decisions"))

    option: OptionName | None = Field(default=None, description="the whole proposal's option")
    decisions: list[FindingDecision] | None = Field(
        default=None, min_length=1, max_length=500, description="each finding's option, instead of option"
    )
    reason: str = Field(default="", max_length=2000)
    expires_at: datetime | None = Field(default=None, description="for option accept: when the ignore rules end")

    @model_validator(mode="after")
    def _one_form(self) -> AcceptBody:
        one_given(self, "option", "decisions")
        seen: set[str] = set()
        for index, decision in enumerate(self.decisions or []):
            if decision.finding in seen:
                raise FieldError(("decisions", index, "finding"), "this finding is decided twice")
            seen.add(decision.finding)
        return self

    def per_finding(self) -> dict[str, OptionName]:
        return {decision.finding: decision.option for decision in self.decisions or []}


class RejectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=2000)


@dataclass
class Accepted:
    proposal: Proposal
    run: Run | None = None
    run_created: bool = False


class ProposalDecisions:
    def __init__(
        self,
        store: InventoryStore,
        provisioning: ProvisioningApi,
        *,
        settings: InventorySettings,
        targets: Sequence[ProvisioningTarget],
    ) -> None:
        self._store = store
        self._provisioning = provisioning
        self._settings = settings
        self._targets = targets

    @on_conflict
    def accept(
        self, tenant: str, proposal_id: str, body: AcceptBody, *, operator: str, client: str | None = None
    ) -> Accepted:
        versioned = self._open(tenant, proposal_id, body)
        proposal = versioned.value
        if proposal.state is ProposalState.ACCEPTED:  # the same request again
            return self._declare(proposal)
        now = clock.utcnow()
        decision = ProposalDecision(
            option=body.option, by=operator, client=client, at=now.isoformat(), reason=body.reason
        )
        rules = self._decide(proposal, body, decision, now)
        accepted = proposal.model_copy(
            update={"state": ProposalState.ACCEPTED, "decision": decision, "updated_at": now.isoformat()}
        )
        operations = [
            self._store.proposal_operation(accepted, versioned.etag),
            *(self._store.rule_operation(rule) for rule in rules),
        ]
        self._commit(accepted, operations, events.proposal_accepted(accepted))
        return self._declare(accepted)

    @on_conflict
    def reject(
        self, tenant: str, proposal_id: str, body: RejectBody, *, operator: str, client: str | None = None
    ) -> Proposal:
        versioned = self._found(tenant, proposal_id)
        proposal = versioned.value
        if proposal.state is not ProposalState.OPEN:
            raise ProposalClosed(proposal.id, proposal.state.value)
        now = clock.now_iso()
        rejected = proposal.model_copy(
            update={
                "state": ProposalState.REJECTED,
                "updated_at": now,
                "decision": ProposalDecision(by=operator, client=client, at=now, reason=body.reason),
            }
        )
        self._commit(
            rejected, [self._store.proposal_operation(rejected, versioned.etag)], events.proposal_rejected(rejected)
        )
        return rejected

    # -- steps -----------------------------------------------------------------------------------

    def _found(self, tenant: str, proposal_id: str) -> Versioned[Proposal]:
        versioned = self._store.proposal(tenant, proposal_id)
        if versioned is None:
            raise NotFound(f"proposal {proposal_id}")
        return versioned

    def _open(self, tenant: str, proposal_id: str, body: AcceptBody) -> Versioned[Proposal]:
        """The proposal, open and still measured against the applied state (or accepted by this decision)."""
        versioned = self._found(tenant, proposal_id)
        proposal: Proposal = versioned.value
        if proposal.state is ProposalState.ACCEPTED and proposal.decision and _same(proposal.decision, body):
            return versioned
        if proposal.state is not ProposalState.OPEN:
            note = f" ({proposal.public_view()['note']})" if proposal.superseded_by else ""
            raise ProposalClosed(proposal.id, proposal.state.value, note)
        applied = self._provisioning.applied(tenant, proposal.environment)
        if (
            applied is None
            or applied.digest != proposal.basis_digest
            or (proposal.basis_run_id and applied.run_id and applied.run_id != proposal.basis_run_id)
        ):
            now = clock.now_iso()
            run_id, digest = (applied.run_id or "", applied.digest) if applied else ("", "")
            superseded = proposal.model_copy(
                update={
                    "state": ProposalState.SUPERSEDED,
                    "updated_at": now,
                    "superseded_by": Supersession(run_id=run_id, specification_digest=digest, at=now),
                }
            )
            self._commit(superseded, [self._store.proposal_operation(superseded, versioned.etag)], None)
            raise ProposalSuperseded(
                proposal.id,
                f"run {run_id} applied a newer specification of "
                f"{proposal.environment}; scan again for a current proposal",
            )
        return versioned

    def _decide(
        self, proposal: Proposal, body: AcceptBody, decision: ProposalDecision, now: datetime
    ) -> list[IgnoreRule]:
        """Fill in ``decision`` (each finding's option, the run it declares) and return the rules it writes.

        Only what is still drift is acted on: a resolved finding needs nothing, and a suppressed
        one is an ignore rule's already (a run keeps it as it is).
        """
        open_findings = self._store.findings(proposal.tenant, proposal.environment, FindingState.OPEN)
        decision.findings = _chosen(proposal, body, {f.id for f in open_findings})
        active = {f.id: f for f in open_findings if f.active}
        to_run = {fid: option for fid, option in decision.findings.items() if option != "accept" and fid in active}
        if to_run:
            specification = self._specification_for(proposal, open_findings, to_run, body)
            decision.run_id = run_id_for(proposal.tenant, _key(proposal, decision))
            decision.specification_digest = specification.digest()
        accepted = [active[fid] for fid, option in decision.findings.items() if option == "accept" and fid in active]
        rules = self._rules_for(proposal, accepted, body, decision.by, now)
        decision.ignore_rule_ids = [rule.id for rule in rules]
        return rules

    def _specification_for(
        self, proposal: Proposal, open_findings: list[Finding], to_run: Mapping[str, str], body: AcceptBody
    ) -> EnvironmentSpecification:
        """The specification the decision declares (saved, so the run and a retry can load it)."""
        label = body.option or "decisions"
        applied = self._provisioning.load_specification(
            proposal.tenant, proposal.environment, digest=proposal.basis_digest
        )
        try:
            specification = declared_specification(applied, open_findings, to_run).specification
        except NotAdoptable as error:
            raise OptionUnavailable(label, str(error)) from None
        if target_for(self._targets, specification.target, proposal.tenant) is None:
            raise OptionUnavailable(label, f"target {specification.target} is no longer configured")
        self._provisioning.save_specification(specification)
        return specification

    def _rules_for(
        self, proposal: Proposal, findings: list[Finding], body: AcceptBody, operator: str, now: datetime
    ) -> list[IgnoreRule]:
        inventory = self._settings
        reason = body.reason or f"accepted drift of proposal {proposal.id}"
        try:
            return [
                new_rule(
                    proposal.tenant,
                    proposal.environment,
                    request,
                    author=operator,
                    now=now,
                    default_days=inventory.default_ignore_days,
                    max_days=inventory.max_ignore_days,
                    proposal_id=proposal.id,
                )
                for finding in findings
                for request in _rule_requests(finding, reason, body.expires_at)
            ]
        except ValueError as error:
            raise InvalidInput([{"path": "/expires_at", "message": str(error)}]) from None

    def _declare(self, proposal: Proposal) -> Accepted:
        decision = proposal.decision
        if decision is None or decision.option == "accept" or not decision.specification_digest:
            return Accepted(proposal)
        specification = self._provisioning.load_specification(
            proposal.tenant, proposal.environment, digest=decision.specification_digest
        )
        source = SourceInfo(kind="proposal", path=f"proposals/{proposal.id}/{decision.option or 'decisions'}")
        run, created = self._provisioning.declare(
            specification,
            source=source,
            idempotency_key=_key(proposal, decision),
            # The operator who accepted it, from their token (a proposal's decision is a person's).
            requester=Requester(decision.by, PrincipalKind.PERSON, decision.client),
        )
        return Accepted(proposal, run, created)

    def _commit(self, proposal: Proposal, operations: list[TransactionOperation], event: NewEvent | None) -> None:
        try:
            self._store.commit(proposal.tenant, proposal.environment, operations, [event] if event else [])
        except AlreadyExists:
            raise ConcurrencyConflict(f"proposal {proposal.id} changed concurrently") from None


def _key(proposal: Proposal, decision: ProposalDecision) -> str:
    """The idempotency key of the run a decision declares (the inbox recognises it by the proposal id)."""
    if decision.option is not None:
        return f"{proposal.id}:{decision.option}"
    return f"{proposal.id}:decisions-{_digest(decision.findings)}"


def _digest(choices: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(choices, sort_keys=True).encode()).hexdigest()[:16]


def _same(decision: ProposalDecision, body: AcceptBody) -> bool:
    """Is ``body`` the request that made ``decision`` (a retry), rather than a different decision?"""
    if body.option is not None:
        return decision.option == body.option
    return decision.option is None and decision.findings == body.per_finding()


def _chosen(proposal: Proposal, body: AcceptBody, open_ids: set[str]) -> dict[str, OptionName]:
    """Each of the proposal's findings and its option; 422 naming the decisions that do not fit."""
    if body.option is not None:
        return dict.fromkeys(proposal.finding_ids, body.option)
    decisions = body.decisions or []
    wrong = [
        {"path": f"/decisions/{index}/finding", "message": f"not a finding of proposal {proposal.id}"}
        for index, decision in enumerate(decisions)
        if decision.finding not in proposal.finding_ids
    ]
    if wrong:
        raise InvalidInput(wrong)
    chosen = body.per_finding()
    missing = [fid for fid in proposal.finding_ids if fid not in chosen and fid in open_ids]
    if missing:
        raise InvalidInput(
            [
                {
                    "path": "/decisions",
                    "message": f"decide every open finding of the proposal; missing: {', '.join(missing)}",
                }
            ]
        )
    return chosen


def _rule_requests(finding: Finding, reason: str, expires_at: datetime | None) -> list[NewIgnoreRule]:
    if finding.kind is FindingKind.CHANGED and finding.fields:
        return [
            NewIgnoreRule(resource=finding.address, field=f.path, reason=reason, expires_at=expires_at)
            for f in finding.fields
        ]
    return [NewIgnoreRule(resource=finding.address, reason=reason, expires_at=expires_at)]
