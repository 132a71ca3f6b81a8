"""Is a webhook delivery signed with the binding's secret? (constant-time comparisons only)

Two ways to prove it, whichever the sender can do:

- ``X-Hub-Signature-256: sha256=<hex>``: HMAC-SHA256 of the raw body with the
  secret (GitHub's header; any sender, an Azure DevOps relay included, may
  compute it);
- ``Authorization: Basic`` whose password is the secret (what an Azure DevOps
  service hook can send; the user name is not checked).

Every comparison is ``hmac.compare_digest``, so the time taken says nothing
about how much of a guess was right.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping

SIGNATURE_HEADER = "X-Hub-Signature-256"
_PREFIX = "sha256="


def sign(secret: bytes, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value of ``body`` (what a sender computes)."""
    return _PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def is_signed(headers: Mapping[str, str], body: bytes, secret: bytes) -> bool:
    """True when the delivery proves it knows ``secret`` by either header."""
    signature = _header(headers, SIGNATURE_HEADER)
    if signature is not None:
        return hmac.compare_digest(signature.strip().encode("ascii", "replace"), sign(secret, body).encode("ascii"))
    password = _basic_password(_header(headers, "Authorization"))
    return password is not None and hmac.compare_digest(password, secret)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = headers.get(name.lower())
    return value


def _basic_password(authorization: str | None) -> bytes | None:
    if not authorization:
        return None
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    _, separator, password = decoded.partition(b":")
    return password if separator else None
