"""Validation of bearer JWTs (OAuth2 client credentials).

Checked: signature (RS256 only, so ``alg: none`` and HS/RS confusion are
refused), issuer, audience, expiry and not-before, and a lifetime (``exp`` -
``iat``) of at most ``RuntimeCloud:Auth:MaxTokenLifetimeSeconds``. Scopes come
from ``scp`` (space separated) and, as Entra ID issues them to applications,
from ``roles`` entries that look like scopes; roles from ``roles``; the tenant
from the claim named by ``RuntimeCloud:Auth:TenantClaim``, which must be a
tenant id (it starts every table key); who acts from ``oid``, else ``sub``;
the client application from ``azp``, else ``appid``.

A token whose ``oid`` or ``sub`` is a system principal's name (``autoscaler``,
``gitops``, ... or anything under ``system:``, in any case) is refused: those
names belong to the host's own actors (:mod:`shared.platform.auth.principal`). The
principal's kind is ``service`` for an application's own token (``idtyp`` is
``app``, or the token has no delegated scopes in ``scp``), else ``person``;
never ``system``, whatever the token claims.

Every token that cannot be accepted, however malformed (wrong claim types,
headers PyJWT refuses), is :class:`AuthenticationFailed`, hence a 401.
"""

from __future__ import annotations

from typing import Any

import jwt

from shared.platform.auth.caller import Caller, Role
from shared.platform.auth.principal import PrincipalKind, is_reserved_name
from shared.platform.auth.signing_keys import SigningKeySource
from shared.platform.errors import AuthenticationFailed
from shared.platform.host_settings import AuthSettings
from shared.platform.identifiers import is_tenant

ACCEPTED_ALGORITHMS = ["RS256"]
MAX_IDENTITY_LENGTH = 256
_ROLE_NAMES = {role.value for role in Role}


class TokenValidator:
    def __init__(self, settings: AuthSettings, keys: SigningKeySource) -> None:
        self._settings = settings
        self._keys = keys

    def validate(self, token: str) -> Caller:
        try:
            claims = self._verified_claims(token)
        except (TypeError, ValueError, KeyError, AttributeError):
            # PyJWT assumes well-typed headers in places; a token it trips over is still just malformed.
            raise AuthenticationFailed("malformed token") from None
        self._check_lifetime(claims)
        tenant = claims.get(self._settings.tenant_claim)
        if tenant is None or tenant == "":
            raise AuthenticationFailed(f"token has no tenant claim '{self._settings.tenant_claim}'")
        if not is_tenant(tenant):
            raise AuthenticationFailed(f"the tenant claim '{self._settings.tenant_claim}' is not a tenant id")
        principal = _identity(claims, "oid", "sub")
        if principal is None:
            raise AuthenticationFailed("token names no principal (oid or sub)")
        _refuse_reserved(claims)
        client_id = _identity(claims, "azp", "appid") or principal
        scopes, roles = _scopes_and_roles(claims)
        return Caller(
            client_id=client_id,
            tenant=tenant,
            scopes=scopes,
            roles=roles,
            principal=principal,
            kind=_kind(claims),
        )

    def _verified_claims(self, token: str) -> dict[str, Any]:
        signing_key = self._keys.key_for(token)
        try:
            return jwt.decode(
                token,
                key=signing_key.key,
                algorithms=ACCEPTED_ALGORITHMS,
                audience=self._settings.audience,
                issuer=self._settings.issuer,
                leeway=self._settings.clock_skew_seconds,
                options={"require": ["exp", "iat", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError as error:
            raise AuthenticationFailed("token expired") from error
        except jwt.ImmatureSignatureError as error:
            raise AuthenticationFailed("token not valid yet") from error
        except jwt.InvalidAudienceError as error:
            raise AuthenticationFailed("token is for another audience") from error
        except jwt.InvalidIssuerError as error:
            raise AuthenticationFailed("token from an untrusted issuer") from error
        except jwt.InvalidSignatureError as error:
            raise AuthenticationFailed("token signature does not verify") from error
        except jwt.InvalidAlgorithmError as error:
            raise AuthenticationFailed("token signing algorithm not accepted") from error
        except jwt.PyJWTError as error:
            raise AuthenticationFailed(f"invalid token: {error}") from error

    def _check_lifetime(self, claims: dict[str, Any]) -> None:
        # A lifetime longer than any issuer of this API grants is refused. (PyJWT also accepts numeric
        # strings for exp and iat; the JWT spec says numbers.)
        exp, iat = claims.get("exp"), claims.get("iat")
        if not all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in (exp, iat)):
            raise AuthenticationFailed("the 'exp' and 'iat' claims must be numbers")
        if exp - iat > self._settings.max_token_lifetime_seconds:  # type: ignore[operator]
            raise AuthenticationFailed(f"token lifetime exceeds {self._settings.max_token_lifetime_seconds} seconds")


def _identity(claims: dict[str, Any], *names: str) -> str | None:
    """The first of ``names`` that holds a usable identifier; a claim of another type refuses the token."""
    for name in names:
        value = claims.get(name)
        if value is None or value == "":
            continue
        if not isinstance(value, str) or len(value) > MAX_IDENTITY_LENGTH or not value.isprintable():
            raise AuthenticationFailed(f"the '{name}' claim is not an identifier")
        return value
    return None


def _refuse_reserved(claims: dict[str, Any]) -> None:
    # Both claims, not only the one that names the principal: neither may pass for a system actor.
    # The message says no more than that the principal is refused (not which names are reserved).
    for name in ("oid", "sub"):
        value = claims.get(name)
        if isinstance(value, str) and is_reserved_name(value):
            raise AuthenticationFailed("the token's principal is not accepted")


def _kind(claims: dict[str, Any]) -> PrincipalKind:
    """``service`` for an application's own token, else ``person`` (never ``system``).

    Entra ID marks app-only tokens with ``idtyp: app`` when that optional claim is configured; a token
    without delegated scopes (``scp``) is one an application obtained for itself either way.
    """
    idtyp = claims.get("idtyp")
    if idtyp == "app":
        return PrincipalKind.SERVICE
    if idtyp == "user":
        return PrincipalKind.PERSON
    return PrincipalKind.PERSON if claims.get("scp") else PrincipalKind.SERVICE


def _scopes_and_roles(claims: dict[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    scp = claims.get("scp", "")
    entries = claims.get("roles") or []
    if not isinstance(scp, str):
        raise AuthenticationFailed("the 'scp' claim is not a string")
    if not isinstance(entries, list) or not all(isinstance(entry, str) for entry in entries):
        raise AuthenticationFailed("the 'roles' claim is not a list of strings")
    scopes = set(scp.split())
    roles: set[str] = set()
    for entry in entries:
        # Application permissions arrive in "roles"; the product's roles are a fixed set.
        (roles if entry in _ROLE_NAMES else scopes).add(entry)
    return frozenset(scopes), frozenset(roles)
