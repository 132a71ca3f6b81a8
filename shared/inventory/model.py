"""What a drift scan compares: observed items and expected resources.

Both sides are reduced to the same small shape so one comparison serves
every runner: a *key* that identifies the resource in the target (the
embedded runner's ``type/name`` with table names folded to lower case, an
Azure resource id for ARM, a Pulumi URN), a readable *address*, and a
*state* document holding only the fields a specification controls (metadata
and management tags, Azure tags and location...). Read-only facts (URLs,
modification times) go in ``properties``: shown in the inventory, never a
reason for drift.

An :class:`Observation` is one successful read. A failed read produces no
observation at all (see :mod:`shared.inventory.observers.base`), so "nothing
was read" can never be mistaken for "nothing is there".
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ResourceState(BaseModel):
    """A resource and its comparable state, as observed or as expected."""

    model_config = ConfigDict(frozen=True)

    key: str
    address: str
    type: str
    name: str
    state: dict[str, Any] = Field(default_factory=dict)


class ObservedItem(ResourceState):
    """One resource as the target reported it, with what matters for drift."""

    managed_here: bool = Field(default=False, description="tagged as managed for this tenant and environment")
    properties: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def trusted(
        cls,
        key: str,
        address: str,
        type: str,
        name: str,
        state: dict[str, Any],
        managed_here: bool,
        properties: dict[str, Any],
    ) -> ObservedItem:
        """An item from values already validated (an observer's own resources), built without validation.

        What ``model_construct`` does for a model whose every field is given, without its
        per-field loop: a scan builds one item per resource of the environment, and that
        loop was most of the comparison's cost. Every such item shares one set of field
        names (:data:`_EVERY_FIELD`) instead of allocating its own: the item is frozen, so
        pydantic never changes the set in place (``model_copy`` copies it first), and one
        set fewer per resource is about a sixth of the comparison's time and 472 of the 824
        bytes it allocated per resource (fewer collector runs in a large scan).
        tests/inventory check that an item built here equals the validated one and that
        copying one leaves the others alone.
        """
        item = cls.__new__(cls)
        _set(
            item,
            "__dict__",
            {
                "key": key,
                "address": address,
                "type": type,
                "name": name,
                "state": state,
                "managed_here": managed_here,
                "properties": properties,
            },
        )
        _set(item, "__pydantic_fields_set__", _EVERY_FIELD)
        _set(item, "__pydantic_extra__", None)
        _set(item, "__pydantic_private__", None)
        return item


# What pydantic's own model_construct sets fields with (frozen models refuse plain setattr).
_set = object.__setattr__
# Shared by every trusted item: never changed in place (see ObservedItem.trusted).
_EVERY_FIELD: set[str] = set(ObservedItem.model_fields)


class ExpectedResource(ResourceState):
    """One resource of the last applied desired state, in the observed shape."""

    # Some fields cannot be compared by some observers (an ARM listing does not show a
    # Pulumi input that never reaches Azure); only the fields named here are compared.
    compared_fields: tuple[str, ...] | None = None


class Observation(BaseModel):
    """A successful read of one environment's resources in its target."""

    observer: str
    target: str
    observed_at: str
    items: list[ObservedItem]
    # The observer's own record of what was applied (Pulumi's stack state), used
    # instead of the specification when present.
    expected: list[ExpectedResource] | None = None
    notes: list[str] = Field(default_factory=list)

    def by_key(self) -> dict[str, ObservedItem]:
        return {item.key: item for item in self.items}


class ObservationStatus(str, Enum):
    NEVER = "never"  # no successful read yet
    FRESH = "fresh"  # the last attempt read the target
    STALE = "stale"  # the last attempt failed; the last good observation is kept


class FindingKind(str, Enum):
    MISSING = "missing"  # applied, not there
    UNEXPECTED = "unexpected"  # tagged as managed here, not in the applied desired state
    CHANGED = "changed"  # there, with fields that differ from what was applied


class FieldDifference(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    before: Any = None  # as applied
    after: Any = None  # as observed


class Drift(BaseModel):
    """One difference a comparison found (before ignore rules and finding history)."""

    model_config = ConfigDict(frozen=True)

    kind: FindingKind
    key: str
    address: str
    type: str
    name: str
    fields: list[FieldDifference] = Field(default_factory=list)
    expected: dict[str, Any] | None = None
    observed: dict[str, Any] | None = None

    @property
    def identity(self) -> str:
        """What makes two scans' drift the same finding: its kind and the resource."""
        return f"{self.kind.value}|{self.key}"
