"""Who declared a run: a principal's name and its kind, where the kind comes from the code path.

A token's principal is a ``person`` or a ``service`` (what the token says it
is); a promotion names the person delivery acted for (``delivery``: this host
did not verify it); the host's own actors (the autoscaler, the GitOps
reconciler, restore, the run reconciler, the host itself) are ``system``
principals. Only the code of those actors makes a ``system`` requester
(:meth:`Requester.system`, from a :class:`SystemPrincipal`); nothing read from a
token or a message can, and a token that names a reserved system name is
refused (:func:`is_reserved_name`, checked by :mod:`shared.platform.auth.tokens`), so a
rule that trusts ``requester.kind == "system"`` trusts the product's code only.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

# Any name under this prefix is reserved too, for system principals yet to come.
RESERVED_PREFIX = "system:"


class PrincipalKind(str, Enum):
    PERSON = "person"  # a token acting for a user (delegated permissions)
    SERVICE = "service"  # a token an application obtained for itself (client credentials)
    DELIVERY = "delivery"  # the requester a promotion message names (delivery vouches for it)
    SYSTEM = "system"  # one of the host's own actors: never from a token or a message


class VerifiedCaller(Protocol):
    """What a request's verified caller (:class:`shared.platform.auth.caller.Caller`) tells about who acts."""

    @property
    def principal(self) -> str: ...

    @property
    def kind(self) -> PrincipalKind: ...

    @property
    def client_id(self) -> str: ...


class SystemPrincipal(str, Enum):
    """The host's own actors: their names are reserved (no token may carry one)."""

    AUTOSCALER = "autoscaler"
    GITOPS = "gitops"
    RESTORE = "restore"
    RECONCILER = "reconciler"
    HOST = "runtime-cloud"  # the host itself (e.g. superseding a run when newer desired state arrives)


_RESERVED = frozenset(actor.value for actor in SystemPrincipal)


def _folded(name: str) -> str:
    # NFKC first, so a full-width or otherwise compatible spelling of a reserved name folds onto it.
    return unicodedata.normalize("NFKC", name).casefold().strip()


def is_reserved_name(name: str) -> bool:
    """Is ``name`` a system principal's name (or under :data:`RESERVED_PREFIX`), in any case or spelling?"""
    folded = _folded(name)
    return folded in _RESERVED or folded.startswith(RESERVED_PREFIX)


@dataclass(frozen=True)
class Requester:
    """Who declared a run: ``principal`` (a name), its ``kind``, and the client application (if any)."""

    principal: str
    kind: PrincipalKind
    client: str | None = None

    def __post_init__(self) -> None:
        # A system requester is made from a SystemPrincipal only: never from a name read elsewhere.
        if self.kind is PrincipalKind.SYSTEM and self.principal not in _RESERVED:
            raise ValueError(f"{self.principal!r} is not a system principal")

    @classmethod
    def of_caller(cls, caller: VerifiedCaller) -> Requester:
        """The verified caller of a request (its kind is the token's: person or service)."""
        return cls(caller.principal, caller.kind, caller.client_id)

    @classmethod
    def system(cls, actor: SystemPrincipal, client: str | None = None) -> Requester:
        return cls(actor.value, PrincipalKind.SYSTEM, client)

    @classmethod
    def promoted_by(cls, name: str) -> Requester:
        """The requester a delivery promotion names."""
        return cls(name, PrincipalKind.DELIVERY)

    def is_system(self, actor: SystemPrincipal) -> bool:
        return self.kind is PrincipalKind.SYSTEM and self.principal == actor.value
