"""The inventory's events (CloudEvents through the outbox, stream = the environment).

Emitted only when something new happened, never once per scan: drift seen
again is not announced again (consumers would otherwise be as noisy as the
alerts this module exists to calm).
"""

from __future__ import annotations

from collections import Counter

from shared.inventory.findings import Finding
from shared.inventory.proposals import Proposal
from shared.platform.events.cloudevents import NewEvent


def drift_detected(
    tenant: str, environment: str, *, opened: list[Finding], open_count: int, basis_digest: str
) -> NewEvent:
    return NewEvent(
        "RuntimeDriftDetected",
        f"environments/{environment}",
        tenant,
        {
            "environment": environment,
            "specification_digest": basis_digest,
            "open_findings": open_count,
            "new_findings": [{"id": f.id, "kind": f.kind.value, "address": f.address} for f in opened],
        },
    )


def reconciliation_proposed(proposal: Proposal) -> NewEvent:
    return NewEvent(
        "ReconciliationProposed",
        _subject(proposal),
        proposal.tenant,
        {
            "proposal_id": proposal.id,
            "environment": proposal.environment,
            "finding_ids": proposal.finding_ids,
            "specification_digest": proposal.basis_digest,
            "options": [
                name for name in ("revert", "adopt", "accept") if getattr(proposal.options, name).get("available")
            ],
        },
    )


def proposal_accepted(proposal: Proposal) -> NewEvent:
    decision = proposal.decision
    assert decision is not None
    return NewEvent(
        "ProposalAccepted",
        _subject(proposal),
        proposal.tenant,
        {
            "proposal_id": proposal.id,
            "environment": proposal.environment,
            "option": decision.option,
            # How many findings took each option (the ids stay in the proposal: an event must stay small).
            "decided": dict(Counter(decision.findings.values())),
            "accepted_by": decision.by,
            "run_id": decision.run_id,
            "specification_digest": decision.specification_digest,
            "ignore_rule_ids": decision.ignore_rule_ids,
        },
    )


def proposal_rejected(proposal: Proposal) -> NewEvent:
    decision = proposal.decision
    assert decision is not None
    return NewEvent(
        "ProposalRejected",
        _subject(proposal),
        proposal.tenant,
        {
            "proposal_id": proposal.id,
            "environment": proposal.environment,
            "rejected_by": decision.by,
            "reason": decision.reason,
        },
    )


def _subject(proposal: Proposal) -> str:
    return f"environments/{proposal.environment}/proposals/{proposal.id}"
