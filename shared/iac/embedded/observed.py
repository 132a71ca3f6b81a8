"""What a target storage account actually holds, as typed values.

The planner compares these with the specification; the inventory keeps them
as the environment's observation and compares them with what was applied. A
resource's :meth:`ObservedResource.state` is the part a specification controls
(its metadata, including the management tags), in the same shape as a plan's
``before`` / ``after``, so "has it changed?" is a plain comparison.

A resource's key, manager (from its tags) and comparable state are worked
out once, when it is built from the listing: a drift scan looks at every
resource of an account, and deriving them again for each look (lower-casing
tag names, building the state) was most of what the comparison cost.
:meth:`ObservedResource.state` hands out a copy; :attr:`ObservedResource.comparable`
is the shared one, for readers that only compare it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from shared.desired_state.api import ResourceType
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

    _key: str = PrivateAttr()
    _address: str = PrivateAttr()
    _management: ManagementTags | None = PrivateAttr()
    _owner: tuple[str, str] | None = PrivateAttr()
    _comparable: dict[str, Any] = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        # Derived once here (fields are frozen, so they cannot go out of date).
        self._key = lookup_key(self.type, self.name)
        self._address = f"{self.type.value}/{self.name}"
        self._management = ManagementTags.from_metadata(self.tags)
        self._owner = (self._management.tenant, self._management.environment) if self._management else None
        if self.type is ResourceType.TABLE:
            self._comparable = {"registration": dict(self.tags)} if self.tags else {}
        else:
            self._comparable = {"metadata": {**self.metadata, **self.tags}}

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> ObservedResource:
        copy = super().model_copy(update=update, deep=deep)
        copy.model_post_init(None)  # an update may change what was derived
        return copy

    @property
    def _derived(self) -> dict[str, Any]:
        # Read straight from pydantic's private slot: ``self._key`` goes through the model's
        # ``__getattr__``, which cost more than deriving the value again.
        private = self.__pydantic_private__
        assert private is not None
        return private

    @property
    def address(self) -> str:
        address: str = self._derived["_address"]
        return address

    @property
    def type_name(self) -> str:
        """``type.value``, as the inventory records it."""
        return self.address.partition("/")[0]

    @property
    def key(self) -> str:
        key: str = self._derived["_key"]
        return key

    @property
    def management(self) -> ManagementTags | None:
        """Who manages it according to its tags or registration (None: not this product)."""
        management: ManagementTags | None = self._derived["_management"]
        return management

    @property
    def owner(self) -> tuple[str, str] | None:
        """(tenant, environment) of :attr:`management`: compared without building anything."""
        owner: tuple[str, str] | None = self._derived["_owner"]
        return owner

    @property
    def comparable(self) -> dict[str, Any]:
        """The comparable state itself, shared: read it, never change it (:meth:`state` is a copy)."""
        comparable: dict[str, Any] = self._derived["_comparable"]
        return comparable

    def state(self) -> dict[str, Any]:
        """The comparable state: what a specification controls, tags included (a copy the caller owns)."""
        return {name: dict(value) for name, value in self.comparable.items()}


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
