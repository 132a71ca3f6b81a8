"""The development token issuer.

Its RSA key is generated once under the git-ignored data folder
(``RuntimeCloud:Auth:LocalSigningKeyDirectory``, normally ``.data/auth``): the
private key signs tokens minted here, and ``jwks.json`` beside it is what the
app verifies them with. Tokens look like Entra ID client-credentials tokens.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

PRIVATE_KEY_FILE = "signing-key.pem"
JWKS_FILE = "jwks.json"
DEFAULT_ISSUER = "runtime-cloud-local-issuer"
DEFAULT_AUDIENCE = "api://runtime-cloud"


def ensure_signing_key(directory: Path) -> tuple[rsa.RSAPrivateKey, str]:
    """Load the issuer's key, creating it (atomically) the first time."""
    directory.mkdir(parents=True, exist_ok=True)
    key_path = directory / PRIVATE_KEY_FILE
    if not key_path.exists():
        created = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = created.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        _write_atomically(key_path, pem, exclusive=True)
    key, kid = _load_key(key_path)
    jwks_path = directory / JWKS_FILE
    if not jwks_path.exists() or kid not in jwks_path.read_text():
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
        jwk.update({"kid": kid, "use": "sig", "alg": "RS256"})
        _write_atomically(jwks_path, json.dumps({"keys": [jwk]}).encode(), exclusive=False)
    return key, kid


# Keys already loaded, by file and the file's identity: loading a PEM RSA key checks the key (tens of
# milliseconds of CPU), and a test session mints many tokens with one key. A key file written
# again (another inode, size or time) is loaded again.
_loaded: dict[Path, tuple[tuple[int, int, int], rsa.RSAPrivateKey, str]] = {}


def _load_key(key_path: Path) -> tuple[rsa.RSAPrivateKey, str]:
    status = key_path.stat()
    identity = (status.st_ino, status.st_size, status.st_mtime_ns)
    cached = _loaded.get(key_path)
    if cached is not None and cached[0] == identity:
        return cached[1], cached[2]
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError(f"{key_path} does not hold an RSA key (tokens are signed RS256)")
    kid = _key_id(key)
    _loaded[key_path] = (identity, key, kid)
    return key, kid


def mint_token(
    directory: Path,
    *,
    tenant: str,
    scopes: Iterable[str] = (),
    roles: Iterable[str] = (),
    client_id: str = "local-developer",
    object_id: str | None = None,
    subject: str | None = None,
    issuer: str = DEFAULT_ISSUER,
    audience: str = DEFAULT_AUDIENCE,
    lifetime_seconds: int = 3600,
    tenant_claim: str = "tid",
    not_before: int | None = None,
) -> str:
    key, kid = ensure_signing_key(directory)
    now = int(time.time())
    claims = {
        "iss": issuer,
        "aud": audience,
        "sub": subject or client_id,
        "azp": client_id,
        tenant_claim: tenant,
        "scp": " ".join(scopes),
        "roles": list(roles),
        "iat": now,
        "nbf": not_before if not_before is not None else now,
        "exp": now + lifetime_seconds,
        "jti": uuid.uuid4().hex,
    }
    if object_id is not None:  # who acts, as Entra ID names it; without it, sub (the client) stands in
        claims["oid"] = object_id
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def _key_id(key: rsa.RSAPrivateKey) -> str:
    import hashlib

    public = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(public).hexdigest()[:16]


def _write_atomically(path: Path, data: bytes, exclusive: bool) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=path.parent)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    os.chmod(temporary, 0o600)
    if exclusive:
        try:
            os.link(temporary, path)  # fails if another process created it first
        except FileExistsError:
            pass
        os.unlink(temporary)
    else:
        os.replace(temporary, path)
