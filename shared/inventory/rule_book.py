"""Creating and deleting an environment's ignore rules (the HTTP API's side of :mod:`.ignore_rules`).

A rule takes effect at the next scan: findings it covers become suppressed
(kept, with the rule's id, but not proposed); deleting a rule or letting it
expire makes the drift show again at the next scan.

A rule's ``resource`` must name a resource of the environment (its address or
key): declared in the applied specification, seen by the last observation, or
the subject of an open finding. A typo would otherwise be a rule that
silently suppresses nothing while the operator believes the drift is handled.
"""

from __future__ import annotations

from shared.inventory.expected import expected_resources
from shared.inventory.findings import FindingState
from shared.inventory.ignore_rules import IgnoreRule, NewIgnoreRule, new_rule
from shared.inventory.settings import InventorySettings
from shared.inventory.store import InventoryStore
from shared.platform import clock
from shared.platform.errors import InvalidInput, NotFound
from shared.provisioning.api import ProvisioningApi


class RuleBook:
    def __init__(self, store: InventoryStore, provisioning: ProvisioningApi, settings: InventorySettings) -> None:
        self._store = store
        self._provisioning = provisioning
        self._settings = settings

    def create(self, tenant: str, environment: str, request: NewIgnoreRule, *, author: str) -> IgnoreRule:
        self._require(tenant, environment)
        if request.resource not in self.addresses(tenant, environment):
            raise InvalidInput(
                [
                    {
                        "path": "/resource",
                        "message": (
                            f"{request.resource} is not a resource of environment {environment}: name its "
                            "address (e.g. queue/orders) as declared, observed or reported by a finding "
                            "(scan first if it appeared since)"
                        ),
                    }
                ]
            )
        inventory = self._settings
        try:
            rule = new_rule(
                tenant,
                environment,
                request,
                author=author,
                now=clock.utcnow(),
                default_days=inventory.default_ignore_days,
                max_days=inventory.max_ignore_days,
            )
        except ValueError as error:
            raise InvalidInput([{"path": "/expires_at", "message": str(error)}]) from None
        self._store.commit(tenant, environment, [self._store.rule_operation(rule)])
        return rule

    def delete(self, tenant: str, environment: str, rule_id: str) -> None:
        self._require(tenant, environment)
        if not self._store.delete_rule(tenant, environment, rule_id):
            raise NotFound(f"ignore rule {rule_id}")

    def addresses(self, tenant: str, environment: str) -> set[str]:
        """Every address and key the environment's resources are known by."""
        known: set[str] = set()
        applied = self._provisioning.applied(tenant, environment)
        for resource in expected_resources(applied, self._provisioning) if applied else []:
            known |= {resource.address, resource.key}
        observation = self._store.load_observation(tenant, environment)
        for item in [*observation.items, *(observation.expected or [])] if observation else []:
            known |= {item.address, item.key}
        for finding in self._store.findings(tenant, environment, FindingState.OPEN):
            known |= {finding.address, finding.key}
        return known

    def _require(self, tenant: str, environment: str) -> None:
        if not self._provisioning.environment_exists(tenant, environment):
            raise NotFound(f"environment {environment}")
