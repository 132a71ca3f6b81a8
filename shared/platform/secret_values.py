"""Recognising secret values where only references belong.

Targets (settings) and specifications name credentials, configuration and
secrets only by reference (an app setting, a Key Vault secret URI, a Config
Platform key). A value that looks like a secret is refused where it is
written, so it never reaches a stored specification, a receipt, an event or a
log. Two tests, either suffices:

- the value's shape: a connection string with a key or password, a storage
  account key, a private key, a JWT, a credential inside a URL, well-known
  token formats, or a long base64 string that mixes cases and digits;
- the field's name (``password``, ``client_secret``, ``account_key``,
  ``connection_string``...), unless the value is a reference.

Findings name the field (a JSON pointer) and what it looked like, never the value.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

# What the targets guard has always refused: secrets inside connection strings and SAS URLs.
SECRET_MARKERS = re.compile(r"(AccountKey=|SharedAccessSignature=|[?&]sig=|password=|pwd=|client_secret)", re.I)

_SHAPES: list[tuple[str, re.Pattern[str]]] = [
    ("a connection string or URL with a key, signature or password", SECRET_MARKERS),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.")),
    ("a credential inside a URL", re.compile(r"://[^/\s:@]+:[^/\s@]+@")),
    (
        "an access token",  # GitHub, Slack, AWS access key ids
        re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{30,}|xox[abp]-[A-Za-z0-9-]{10,}|(AKIA|ASIA)[0-9A-Z]{16})\b"),
    ),
    # Storage account keys are 88 base64 characters (64 bytes); other keys are padded base64 too.
    ("a storage account key", re.compile(r"^[A-Za-z0-9+/]{86}==$")),
    ("a key (base64)", re.compile(r"^[A-Za-z0-9+/]{40,}={1,2}$")),
]
_RANDOM_TOKEN = re.compile(r"^[A-Za-z0-9+/_-]{32,}$")
_RANDOM_BITS_PER_CHARACTER = 4.5  # random base64 scores about 5; words and paths about 3.5-4

_SECRET_NAME = re.compile(
    r"(^|[_.:-])(password|passwd|pwd|secret|client_?secret|api_?key|access_?key|account_?key|private_?key|"
    r"shared_?key|connection_?string|conn_?str|sas|sas_?token|(access|auth|bearer|refresh|id)_?token|"
    r"credentials?)($|[_.:-])",
    re.I,
)

# Values that are references to a secret, which a secret-sounding field may hold.
_REFERENCE = re.compile(r"^(https://[a-z0-9-]+\.vault\.azure\.net/secrets/\S+|@Microsoft\.KeyVault\(.*\))$", re.I)


def secret_kind(value: str) -> str | None:
    """What ``value`` looks like if it looks like a secret, else None."""
    for kind, shape in _SHAPES:
        if shape.search(value):
            return kind
    if _RANDOM_TOKEN.match(value) and _looks_random(value):
        return "a key or token (a long random string)"
    return None


def _looks_random(value: str) -> bool:
    """Upper, lower case and digits, with the character entropy of random data rather than of words."""
    if not (any(c.isupper() for c in value) and any(c.islower() for c in value) and any(c.isdigit() for c in value)):
        return False
    counts = Counter(value)
    bits = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return bits >= _RANDOM_BITS_PER_CHARACTER


def secret_name(name: str) -> bool:
    """Whether a field called ``name`` would hold a secret."""
    return _SECRET_NAME.search(name) is not None


def find_secrets(document: Any, prefix: str = "") -> list[dict[str, str]]:
    """One ``{"path", "message"}`` per string in ``document`` that looks like a secret (paths are JSON pointers)."""
    found: list[dict[str, str]] = []
    stack: list[tuple[str, str | None, Any]] = [(prefix, None, document)]
    while stack:
        path, name, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{path}/{_escape(str(key))}", str(key), item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}/{index}", None, item) for index, item in enumerate(value))
        elif isinstance(value, str) and (reason := _why_secret(name, value)):
            found.append(
                {
                    "path": path or "/",
                    "message": f"holds {reason}; secrets are passed only by "
                    "reference (the specification's secrets list)",
                }
            )
    return sorted(found, key=lambda error: error["path"])


def _why_secret(name: str | None, value: str) -> str | None:
    if kind := secret_kind(value):
        return f"what looks like {kind}"
    if name is not None and secret_name(name) and value.strip() and not _REFERENCE.match(value.strip()):
        return f"a value in a field named '{name}'"
    return None


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")
