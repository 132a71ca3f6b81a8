"""Bearer-token authentication and authorisation of callers."""

from shared.platform.auth.caller import Caller, Role, Scope
from shared.platform.auth.principal import PrincipalKind, Requester, SystemPrincipal

__all__ = ["Caller", "PrincipalKind", "Requester", "Role", "Scope", "SystemPrincipal"]
