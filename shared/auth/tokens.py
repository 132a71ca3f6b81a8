"""Validation of bearer JWTs (OAuth2 client credentials).

Checked: signature (RS256 only, so ``alg: none`` and HS/RS confusion are
refused), issuer, audience, expiry and not-before. Scopes come from ``scp``
(space separated) and, as Entra ID issues them to applications, from ``roles``
entries that look like scopes; roles from ``roles``; the tenant from the claim
named by ``RuntimeCloud:Auth:TenantClaim``.
"""

from __future__ import annotations

from typing import Any

import jwt

from shared.auth.caller import Caller, Role
from shared.auth.signing_keys import SigningKeySource
from shared.errors import AuthenticationFailed
from shared.settings import AuthSettings

ACCEPTED_ALGORITHMS = ["RS256"]
_ROLE_NAMES = {role.value for role in Role}


class TokenValidator:
    def __init__(self, settings: AuthSettings, keys: SigningKeySource) -> None:
        self._settings = settings
        self._keys = keys

    def validate(self, token: str) -> Caller:
        claims = self._verified_claims(token)
        tenant = claims.get(self._settings.tenant_claim)
        if not isinstance(tenant, str) or not tenant:
            raise AuthenticationFailed(f"token has no tenant claim '{self._settings.tenant_claim}'")
        client_id = claims.get("azp") or claims.get("appid") or claims.get("sub")
        if not isinstance(client_id, str) or not client_id:
            raise AuthenticationFailed("token names no client")
        scopes, roles = _scopes_and_roles(claims)
        return Caller(client_id=client_id, tenant=tenant, scopes=scopes, roles=roles)

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
        except jwt.InvalidTokenError as error:
            raise AuthenticationFailed(f"invalid token: {error}") from error


def _scopes_and_roles(claims: dict[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    scopes = set(str(claims.get("scp", "")).split())
    roles: set[str] = set()
    for entry in claims.get("roles") or []:
        # Application permissions arrive in "roles"; the product's roles are a fixed set.
        (roles if entry in _ROLE_NAMES else scopes).add(str(entry))
    return frozenset(scopes), frozenset(roles)
