"""What a target storage account actually holds, as typed values.

The planner compares these with the specification; the inventory keeps them
as the environment's observation and compares them with what was applied. A
resource's :meth:`ObservedResource.state` is the part a specification controls
(its metadata, including the management tags), in the same shape as a plan's
``before`` / ``after``, so "has it changed?" is a plain comparison.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.desired_state import ResourceType
from shared.iac.tags import ManagementTags


def lookup_key(resource_type: ResourceType, name: str) -> str:
    """The key two names of one resource share: table names are case-insensitive in Azure Storage."""
    return f"{resource_type.value}/{name.lower() if resource_type is ResourceType.TABLE else name}"


class ObservedResource(BaseModel):
    """One container, queue or table as the target reported it."""

    model_config = ConfigDict(frozen=True)

    type: ResourceType
    name: str
    metadata: dict[str, str] = Field(default_factory=dict, description="the user's metadata (no rc_ tags)")
    tags: dict[str, str] = Field(
        default_factory=dict,
        description="the product's rc_ management tags (of a table: its registration in the ownership registry)",
    )
    properties: dict[str, Any] = Field(
        default_factory=dict, description="read-only facts: url, and for containers last_modified, public_access"
    )

    @property
    def address(self) -> str:
        return f"{self.type.value}/{self.name}"

    @property
    def key(self) -> str:
        return lookup_key(self.type, self.name)

    @property
    def management(self) -> ManagementTags | None:
        """Who manages it according to its tags or registration (None: not this product)."""
        return ManagementTags.from_metadata(self.tags)

    def state(self) -> dict[str, Any]:
        """The comparable state: what a specification controls, tags included."""
        if self.type is ResourceType.TABLE:
            return {"registration": dict(self.tags)} if self.tags else {}
        return {"metadata": {**self.metadata, **self.tags}}


class ObservedState(BaseModel):
    """Every container, queue and table of one target account at one moment."""

    target: str
    account: str
    observed_at: str
    resources: list[ObservedResource]

    def by_key(self) -> dict[str, ObservedResource]:
        """Resources by :func:`lookup_key` (build once, look up many)."""
        return {resource.key: resource for resource in self.resources}

    def find(self, resource_type: ResourceType, name: str) -> ObservedResource | None:
        key = lookup_key(resource_type, name)
        return next((resource for resource in self.resources if resource.key == key), None)

    def managed_for(self, tags: ManagementTags) -> list[ObservedResource]:
        """The resources tagged as managed for exactly this tenant and environment."""
        return [resource for resource in self.resources if resource.management == tags]

    def counts(self) -> dict[str, int]:
        counts = {resource_type.value: 0 for resource_type in ResourceType}
        for resource in self.resources:
            counts[resource.type.value] += 1
        return counts
