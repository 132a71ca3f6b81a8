"""A resource's comparable state, and field-level differences between two states.

A state is a small JSON document: ``{"metadata": {...}}`` for containers and
queues (the user's metadata plus the management tags), ``{"registration":
{...}}`` for tables (the same tags, from the ownership registry, since a
table carries no metadata; ``{}`` when unregistered). ``None`` means "absent".

Differences are listed per leaf field as dotted paths (``metadata.owner``) so
that a reviewer, a drift finding or an ignore rule can name one field. The
same function serves the planner (actual -> desired) and the inventory
(applied -> observed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.desired_state.api import EmbeddedResource, ResourceType
from shared.iac.model import FieldChange
from shared.iac.tags import ManagementTags


def desired_state(resource: EmbeddedResource, tags: ManagementTags) -> dict[str, Any]:
    """The state a declared resource should have in the target, management tags included."""
    if resource.type is ResourceType.TABLE:
        return {"registration": tags.as_metadata()}
    return {"metadata": {**resource.metadata, **tags.as_metadata()}}


def field_changes(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[FieldChange]:
    """Every leaf field whose value differs, sorted by path (absent on one side: ``None``)."""
    old = flatten(before or {})
    new = flatten(after or {})
    return [
        FieldChange(path=path, before=old.get(path), after=new.get(path))
        for path in sorted(old.keys() | new.keys())
        if old.get(path) != new.get(path) or (path in old) != (path in new)
    ]


def flatten(document: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"metadata": {"owner": "x"}}`` -> ``{"metadata.owner": "x"}``; empty mappings vanish."""
    flat: dict[str, Any] = {}
    for key, value in document.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{path}."))
        else:
            flat[path] = value
    return flat
