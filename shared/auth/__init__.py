"""Bearer-token authentication and authorisation of callers."""

from shared.auth.caller import Caller, Role, Scope

__all__ = ["Caller", "Role", "Scope"]
