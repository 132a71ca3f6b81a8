"""Who is calling: the facts every endpoint authorises against."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Scope(str, Enum):
    HEALTH_READ = "factory.health.read"
    META_READ = "factory.meta.read"
    RUNTIME_READ = "factory.runtime.read"
    RUNTIME_WRITE = "factory.runtime.write"
    CAPACITY_LEASE = "factory.capacity.lease"


class Role(str, Enum):
    OBSERVER = "Observer"
    OPERATOR = "Operator"
    PLATFORM_ADMIN = "PlatformAdmin"


@dataclass(frozen=True)
class Caller:
    """An authenticated client. ``tenant`` is the row filter for everything it reads or writes."""

    client_id: str
    tenant: str
    scopes: frozenset[str]
    roles: frozenset[str]

    def has_scope(self, scope: Scope | str) -> bool:
        return _value(scope) in self.scopes

    def has_role(self, role: Role | str) -> bool:
        return _value(role) in self.roles


def _value(item: Enum | str) -> str:
    return item.value if isinstance(item, Enum) else item
