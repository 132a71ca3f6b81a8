"""What the inventory's HTTP API answers: environments, inventories, findings, rules, proposals.

Every read starts from the caller's tenant (the row filter): an environment,
finding or proposal of another tenant is simply not in the partitions read,
so it answers 404 like one that does not exist.
"""

from __future__ import annotations

from typing import Any

from shared.inventory.findings import Finding, FindingState
from shared.inventory.ignore_rules import IgnoreRule
from shared.inventory.model import ObservationStatus
from shared.inventory.proposals import Proposal, ProposalState
from shared.inventory.store import InventoryStore
from shared.platform import clock
from shared.platform.errors import InvalidInput, NotFound
from shared.platform.storage.streams import EnvironmentRow
from shared.provisioning.api import ProvisioningApi

# A finding's state as asked for -> as stored (suppressed findings are open ones a rule hides; all: any).
_FINDINGS_STORED: dict[str, str | None] = {
    "open": FindingState.OPEN.value,
    "suppressed": FindingState.OPEN.value,
    "resolved": FindingState.RESOLVED.value,
    "all": None,
}


class InventoryViews:
    def __init__(self, store: InventoryStore, provisioning: ProvisioningApi) -> None:
        self._store = store
        self._provisioning = provisioning

    def environments(self, tenant: str, *, limit: int, continuation: str | None) -> dict[str, Any]:
        """A page of the tenant's environments, in name order (each summary reads two rows)."""
        names, following = self._provisioning.environments_page(tenant, limit=limit, continuation=continuation)
        return {"environments": [self._summary(tenant, name) for name in names], "continuation": following}

    def inventory(self, tenant: str, environment: str) -> dict[str, Any]:
        self.require_environment(tenant, environment)
        summary = self._summary(tenant, environment)
        observation = self._store.load_observation(tenant, environment)
        findings = self._store.findings(tenant, environment, FindingState.OPEN)
        summary["resources"] = [item.model_dump(mode="json") for item in observation.items] if observation else []
        summary["observation"]["notes"] = observation.notes if observation else []
        # Counts (open_findings, suppressed_findings) as in every view; the findings themselves as lists.
        summary["findings"] = [f.public_view() for f in findings if f.active]
        summary["suppressed"] = [f.public_view() for f in findings if not f.active]
        return summary

    def findings(
        self, tenant: str, environment: str, *, state: str | None, limit: int, continuation: str | None
    ) -> dict[str, Any]:
        """A page of the environment's findings (open by default), in finding id order."""
        self.require_environment(tenant, environment)
        wanted = state or "open"
        if wanted not in _FINDINGS_STORED:
            raise InvalidInput([{"path": "/state", "message": "one of open, suppressed, resolved, all"}])
        stored = _FINDINGS_STORED[wanted]
        keep = None
        if wanted in ("open", "suppressed"):  # both are stored open: whether a rule hides one is in its document
            suppressed = wanted == "suppressed"
            keep = (wanted, lambda finding: bool(finding.suppressed_by) == suppressed)
        found, following = self._store.documents_page(
            Finding, "finding|", tenant, environment, state=stored, limit=limit, continuation=continuation, keep=keep
        )
        findings = [finding.public_view() for finding in found]
        return {"environment": environment, "findings": findings, "continuation": following}

    def finding(self, tenant: str, environment: str, finding_id: str) -> dict[str, Any]:
        self.require_environment(tenant, environment)
        found = self._store.finding(tenant, environment, finding_id)
        if found is None:
            raise NotFound(f"finding {finding_id}")
        return found.public_view()

    def rules(self, tenant: str, environment: str, *, limit: int, continuation: str | None) -> dict[str, Any]:
        """A page of the environment's ignore rules, in rule id order."""
        self.require_environment(tenant, environment)
        now = clock.utcnow()
        found, following = self._store.documents_page(
            IgnoreRule, "rule|", tenant, environment, state=None, limit=limit, continuation=continuation
        )
        rules = [rule.public_view(now) for rule in found]
        return {"environment": environment, "ignore_rules": rules, "continuation": following}

    def proposals(
        self, tenant: str, *, environment: str | None, state: str | None, limit: int, continuation: str | None
    ) -> dict[str, Any]:
        """A page of the tenant's proposals (of one environment), by environment then proposal id."""
        try:
            wanted = ProposalState(state) if state else None
        except ValueError:
            raise InvalidInput([{"path": "/state", "message": f"one of {[s.value for s in ProposalState]}"}]) from None
        if environment:
            self.require_environment(tenant, environment)
        found, following = self._store.documents_page(
            Proposal,
            "proposal|",
            tenant,
            environment,
            state=wanted.value if wanted else None,
            limit=limit,
            continuation=continuation,
        )
        proposals = [proposal.public_view() for proposal in found]
        return {"proposals": proposals, "continuation": following}

    def proposal(self, tenant: str, proposal_id: str) -> dict[str, Any]:
        found = self._store.proposal(tenant, proposal_id)
        if found is None:
            raise NotFound(f"proposal {proposal_id}")
        return found.value.public_view()

    def require_environment(self, tenant: str, environment: str) -> None:
        if not self._provisioning.environment_exists(tenant, environment):
            raise NotFound(f"environment {environment}")

    def _summary(self, tenant: str, environment: str) -> dict[str, Any]:
        provisioning = self._provisioning.summary(tenant, environment)
        env: EnvironmentRow = self._store.environment(tenant, environment)
        status = env.get("ObservationStatus") or ObservationStatus.NEVER.value
        return {
            "environment": environment,
            "environment_class": provisioning.environment_class,
            "applied": {"specification_digest": provisioning.applied_digest, "run_id": provisioning.applied_run_id}
            if provisioning.applied_digest
            else None,
            "observation": {
                "status": status,
                "fresh": status == ObservationStatus.FRESH.value,
                "observed_at": env.get("ObservedAt") or None,
                "last_attempt_at": env.get("LastAttemptAt") or None,
                "error": env.get("LastError") or None,
                "observer": env.get("Observer") or None,
                "target": env.get("Target") or None,
                "resource_count": env.get("ResourceCount"),
                "last_scan_note": env.get("LastScanNote") or None,
            },
            "open_findings": int(env.get("OpenFindings", 0) or 0),
            "suppressed_findings": int(env.get("SuppressedFindings", 0) or 0),
        }
