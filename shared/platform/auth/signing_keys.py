"""Where the public keys that sign bearer tokens come from.

- ``JwksUri``: a JWKS document fetched (and cached) by PyJWT's ``PyJWKClient``.
- ``Authority``: Entra ID; its OpenID configuration names the JWKS URI.
- ``LocalSigningKeyDirectory``: the development issuer's ``jwks.json``, read from disk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

import jwt
import requests

from shared.platform.errors import AuthenticationFailed
from shared.platform.host_settings import AuthSettings

JWKS_FILE_NAME = "jwks.json"


class SigningKeySource(Protocol):
    def key_for(self, token: str) -> jwt.PyJWK: ...


class JwksUriSource:
    def __init__(self, uri: str) -> None:
        self._client = jwt.PyJWKClient(uri, cache_keys=True, lifespan=3600, timeout=10)

    def key_for(self, token: str) -> jwt.PyJWK:
        try:
            return self._client.get_signing_key_from_jwt(token)
        except jwt.PyJWKClientError as error:
            raise AuthenticationFailed(f"signing key not found: {error}") from error
        except jwt.PyJWTError as error:  # headers PyJWT refuses (crit, a kid that is not a string...)
            raise AuthenticationFailed("malformed token") from error


class LocalJwksSource:
    """Reads the development issuer's JWKS; re-read when the file changes."""

    def __init__(self, directory: str) -> None:
        self._path = Path(directory) / JWKS_FILE_NAME
        self._loaded_mtime: float | None = None
        self._keys: jwt.PyJWKSet | None = None

    def key_for(self, token: str) -> jwt.PyJWK:
        keys = self._key_set()
        kid = _unverified_kid(token)
        for key in keys.keys:
            if key.key_id == kid:
                return key
        raise AuthenticationFailed("token signed with an unknown key")

    def _key_set(self) -> jwt.PyJWKSet:
        try:
            mtime = self._path.stat().st_mtime
        except FileNotFoundError as error:
            raise AuthenticationFailed("no local signing key; mint a token with 'python -m devhost token'") from error
        if self._keys is None or mtime != self._loaded_mtime:
            self._keys = jwt.PyJWKSet.from_dict(json.loads(self._path.read_text()))
            self._loaded_mtime = mtime
        return self._keys


def _unverified_kid(token: str) -> str | None:
    # Any header PyJWT refuses (not only undecodable ones: crit, a kid that is not a string) is a
    # malformed token, i.e. a 401, before any signature is checked.
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.PyJWTError as error:
        raise AuthenticationFailed("malformed token") from error
    if kid is not None and not isinstance(kid, str):
        raise AuthenticationFailed("malformed token")
    return kid


def key_source_for(settings: AuthSettings) -> SigningKeySource:
    if settings.jwks_uri:
        return JwksUriSource(settings.jwks_uri)
    if settings.authority:
        discovery = settings.authority.rstrip("/") + "/.well-known/openid-configuration"
        jwks_uri = requests.get(discovery, timeout=10).json()["jwks_uri"]
        return JwksUriSource(jwks_uri)
    assert settings.local_signing_key_directory  # guaranteed by AuthSettings
    return LocalJwksSource(settings.local_signing_key_directory)
