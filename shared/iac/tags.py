"""The product's management tags: how a resource says who manages it.

Every blob container and queue the embedded runner creates carries three
metadata entries with the reserved prefix ``rc_`` (specifications may not use
it, see :mod:`shared.desired_state`):

- ``rc_managed_by`` = ``runtime-cloud``
- ``rc_tenant`` = the tenant of the specification
- ``rc_environment`` = the environment of the specification

They are what makes ownership visible in the target itself, without the host's
own store: the planner deletes only resources tagged for the environment being
planned and refuses to touch one tagged for another environment or tenant, and
the inventory reports a tagged resource that no specification declares as
``unexpected``. The same keys are used as Azure resource tags for programs run
by the Pulumi runner, so the Azure Resource Manager observer can list them.

Tables cannot carry metadata in Azure Storage, so a table's tags live in the
target's ownership registry instead (one row per table, see
:mod:`shared.iac.embedded.table_registry`); read back, they are the table's
tags, and tables are owned, refused, deleted and reported like the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.desired_state.api import RESERVED_METADATA_PREFIX

MANAGED_BY_KEY = f"{RESERVED_METADATA_PREFIX}managed_by"
TENANT_KEY = f"{RESERVED_METADATA_PREFIX}tenant"
ENVIRONMENT_KEY = f"{RESERVED_METADATA_PREFIX}environment"
MANAGED_BY_VALUE = "runtime-cloud"

TAG_KEYS = (MANAGED_BY_KEY, TENANT_KEY, ENVIRONMENT_KEY)


@dataclass(frozen=True, order=True)
class ManagementTags:
    """Who manages a resource: this product, for one tenant's environment."""

    tenant: str
    environment: str

    def as_metadata(self) -> dict[str, str]:
        return {MANAGED_BY_KEY: MANAGED_BY_VALUE, TENANT_KEY: self.tenant, ENVIRONMENT_KEY: self.environment}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, str]) -> ManagementTags | None:
        """The tags a resource carries, or None when this product does not manage it.

        A resource marked ``rc_managed_by=runtime-cloud`` but missing the tenant or
        environment still counts as managed (with empty values), so that it never
        matches an environment and is never silently adopted or deleted.
        """
        lowered = {key.lower(): value for key, value in metadata.items()}
        if lowered.get(MANAGED_BY_KEY) != MANAGED_BY_VALUE:
            return None
        return cls(tenant=lowered.get(TENANT_KEY, ""), environment=lowered.get(ENVIRONMENT_KEY, ""))

    def describe(self) -> str:
        return f"environment {self.environment!r} of tenant {self.tenant!r}"


def is_reserved(key: str) -> bool:
    return key.lower().startswith(RESERVED_METADATA_PREFIX)


def split_metadata(metadata: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split a resource's metadata into (the user's metadata, the product's ``rc_`` tags)."""
    user = {key: value for key, value in metadata.items() if not is_reserved(key)}
    tags = {key.lower(): value for key, value in metadata.items() if is_reserved(key)}
    return user, tags
