"""What the inventory's HTTP API answers: environments, inventories, findings, rules, proposals.

Every read starts from the caller's tenant (the row filter): an environment,
finding or proposal of another tenant is simply not in the partitions read,
so it answers 404 like one that does not exist.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shared.errors import InvalidInput, NotFound
from shared.inventory.findings import FindingState
from shared.inventory.model import ObservationStatus
from shared.inventory.proposals import ProposalState
from shared.inventory.store import InventoryStore
from shared.provisioning.api import ProvisioningApi
from shared.storage.streams import EnvironmentRow


class InventoryViews:
    def __init__(self, store: InventoryStore, provisioning: ProvisioningApi) -> None:
        self._store = store
        self._provisioning = provisioning

    def environments(self, tenant: str) -> dict[str, Any]:
        return {"environments": [self._summary(tenant, name) for name in self._provisioning.environments(tenant)]}

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

    def findings(self, tenant: str, environment: str, *, state: str | None) -> dict[str, Any]:
        self.require_environment(tenant, environment)
        if state in (None, "", "open", "suppressed"):
            found = [
                f
                for f in self._store.findings(tenant, environment, FindingState.OPEN)
                if (state == "suppressed") == bool(f.suppressed_by)
            ]
        elif state == "resolved":
            found = self._store.findings(tenant, environment, FindingState.RESOLVED)
        elif state == "all":
            found = self._store.findings(tenant, environment)
        else:
            raise InvalidInput([{"path": "/state", "message": "one of open, suppressed, resolved, all"}])
        return {"environment": environment, "findings": [f.public_view() for f in found]}

    def finding(self, tenant: str, environment: str, finding_id: str) -> dict[str, Any]:
        self.require_environment(tenant, environment)
        found = self._store.finding(tenant, environment, finding_id)
        if found is None:
            raise NotFound(f"finding {finding_id}")
        return found.public_view()

    def rules(self, tenant: str, environment: str) -> dict[str, Any]:
        self.require_environment(tenant, environment)
        now = datetime.now(UTC)
        rules = sorted((v.value for v in self._store.rules(tenant, environment)), key=lambda r: r.created_at)
        return {"environment": environment, "ignore_rules": [rule.public_view(now) for rule in rules]}

    def proposals(self, tenant: str, *, environment: str | None, state: str | None) -> dict[str, Any]:
        try:
            wanted = ProposalState(state) if state else None
        except ValueError:
            raise InvalidInput([{"path": "/state", "message": f"one of {[s.value for s in ProposalState]}"}]) from None
        if environment:
            self.require_environment(tenant, environment)
        names = [environment] if environment else self._provisioning.environments(tenant)
        found = [v.value for name in names for v in self._store.proposals(tenant, name, wanted)]
        found.sort(key=lambda p: p.created_at, reverse=True)
        return {"proposals": [p.public_view() for p in found]}

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
