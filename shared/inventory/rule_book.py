"""Creating and deleting an environment's ignore rules (the HTTP API's side of :mod:`.ignore_rules`).

A rule takes effect at the next scan: findings it covers become suppressed
(kept, with the rule's id, but not proposed); deleting a rule or letting it
expire makes the drift show again at the next scan.
"""

from __future__ import annotations

from datetime import datetime, timezone

from shared.errors import InvalidInput, NotFound
from shared.inventory.expected import environment_exists
from shared.inventory.ignore_rules import IgnoreRule, NewIgnoreRule, new_rule
from shared.inventory.store import InventoryStore
from shared.provisioning.store import ProvisioningStore
from shared.settings import Settings


class RuleBook:
    def __init__(self, store: InventoryStore, provisioning: ProvisioningStore, settings: Settings) -> None:
        self._store = store
        self._provisioning = provisioning
        self._settings = settings

    def create(self, tenant: str, environment: str, request: NewIgnoreRule, author: str) -> IgnoreRule:
        self._require(tenant, environment)
        inventory = self._settings.runtime_cloud.inventory
        try:
            rule = new_rule(tenant, environment, request, author, datetime.now(timezone.utc),
                            inventory.default_ignore_days, inventory.max_ignore_days)
        except ValueError as error:
            raise InvalidInput([{"path": "/expires_at", "message": str(error)}]) from None
        self._store.commit(tenant, environment, [self._store.rule_operation(rule)])
        return rule

    def delete(self, tenant: str, environment: str, rule_id: str) -> None:
        self._require(tenant, environment)
        if not self._store.delete_rule(tenant, environment, rule_id):
            raise NotFound(f"ignore rule {rule_id}")

    def _require(self, tenant: str, environment: str) -> None:
        if not environment_exists(self._provisioning, tenant, environment):
            raise NotFound(f"environment {environment}")
