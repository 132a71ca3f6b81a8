"""Who is calling: the facts every endpoint authorises against."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from shared.platform.auth.principal import PrincipalKind

TOKEN_KINDS = frozenset({PrincipalKind.PERSON, PrincipalKind.SERVICE})


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
    """An authenticated caller. ``tenant`` is the row filter for everything it reads or writes.

    ``principal`` is who acts (the token's ``oid``, else ``sub``): the person or
    service principal that four-eyes rules compare. ``client_id`` is the client
    application it acts through (``azp``, else ``appid``), recorded beside it;
    one person may use several client apps, so rules never compare client ids.
    ``kind`` is what the token says the principal is: a ``person`` or a ``service``, never
    ``system`` (only the host's own actors are; see :mod:`shared.platform.auth.principal`).
    """

    client_id: str
    tenant: str
    scopes: frozenset[str]
    roles: frozenset[str]
    principal: str = ""
    kind: PrincipalKind = PrincipalKind.PERSON

    def __post_init__(self) -> None:
        if not self.principal:  # a caller built without one acts as its client
            object.__setattr__(self, "principal", self.client_id)
        if self.kind not in TOKEN_KINDS:
            raise ValueError(f"a caller is a person or a service, not {self.kind.value}")

    def has_scope(self, scope: Scope | str) -> bool:
        return _value(scope) in self.scopes

    def has_role(self, role: Role | str) -> bool:
        return _value(role) in self.roles


def _value(item: Enum | str) -> str:
    return item.value if isinstance(item, Enum) else item
