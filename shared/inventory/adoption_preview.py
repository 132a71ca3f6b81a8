"""The specification an accept request would declare by adopting drift, before anything is decided.

A caller that must vet an adoption before it happens (an environment that
follows a Git branch refuses one: the change belongs in a commit, see
:mod:`shared.gitops.adoption`) asks here. It reads what the decision reads
(the proposal, the specification it was measured against, the environment's
open findings: :mod:`shared.inventory.decisions`) and writes nothing.

None when the request adopts nothing (only revert or accept), the proposal is
not the tenant's or not open, or the adoption is not possible: accepting then
answers as it always does (404, ``proposal-not-open``, ``option-unavailable``).
"""

from __future__ import annotations

from shared.desired_state.api import EnvironmentSpecification
from shared.inventory.adoption import NotAdoptable, declared_specification
from shared.inventory.decisions import AcceptBody
from shared.inventory.findings import FindingState
from shared.inventory.proposals import OptionName, ProposalState
from shared.inventory.store import InventoryStore
from shared.provisioning.api import ProvisioningApi


def adopted_specification(
    store: InventoryStore, provisioning: ProvisioningApi, tenant: str, proposal_id: str, body: AcceptBody
) -> EnvironmentSpecification | None:
    versioned = store.proposal(tenant, proposal_id)
    if versioned is None or versioned.value.state is not ProposalState.OPEN:
        return None
    proposal = versioned.value
    chosen: dict[str, OptionName] = (
        dict.fromkeys(proposal.finding_ids, body.option) if body.option is not None else body.per_finding()
    )
    if "adopt" not in chosen.values() or not set(chosen) <= set(proposal.finding_ids):
        return None  # adopts nothing, or names another proposal's finding (accepting answers 422)
    open_findings = store.findings(tenant, proposal.environment, FindingState.OPEN)
    active = {finding.id for finding in open_findings if finding.active}
    to_run = {fid: option for fid, option in chosen.items() if option != "accept" and fid in active}
    if "adopt" not in to_run.values():
        return None  # the drift to adopt went away meanwhile: nothing changes the specification
    applied = provisioning.load_specification(tenant, proposal.environment, digest=proposal.basis_digest)
    try:
        return declared_specification(applied, open_findings, to_run).specification
    except NotAdoptable:
        return None
