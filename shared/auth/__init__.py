"""Bearer-token authentication and authorisation of callers."""

from shared.auth.caller import Caller, Role, Scope
from shared.auth.principal import PrincipalKind, Requester, SystemPrincipal

__all__ = ["Caller", "PrincipalKind", "Requester", "Role", "Scope", "SystemPrincipal"]
