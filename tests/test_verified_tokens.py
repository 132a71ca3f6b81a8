"""What the request pipeline remembers of verified tokens (shared.platform.http.endpoint.VerifiedTokens).

A token's caller is remembered by the token's exact text and never past the
token's own ``exp``; a token whose expiry cannot be read is not remembered.
(The host-level behaviour, every call authenticated, is in tests/test_auth.py.)
"""

from __future__ import annotations

import base64
import json
import time

from shared.platform.auth.caller import Caller
from shared.platform.http.endpoint import VerifiedTokens

CALLER = Caller(client_id="client", tenant="tenant-a", scopes=frozenset({"factory.health.read"}), roles=frozenset())


def _token(claims: dict[str, object]) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.signature"


def test_a_verified_token_is_remembered_until_its_expiry_and_not_after():
    memory = VerifiedTokens()
    valid = _token({"exp": time.time() + 600})
    expired = _token({"exp": time.time() - 1})
    memory.remember(valid, CALLER)
    memory.remember(expired, CALLER)
    assert memory.get(valid) == CALLER
    assert memory.get(expired) is None
    assert memory.get(valid + "x") is None  # only the exact text


def test_a_token_without_a_readable_expiry_is_not_remembered_and_clear_forgets_everything():
    memory = VerifiedTokens()
    for token in (_token({"exp": "soon"}), _token({}), "not-a-jwt"):
        memory.remember(token, CALLER)
        assert memory.get(token) is None
    valid = _token({"exp": time.time() + 600})
    memory.remember(valid, CALLER)
    memory.clear()
    assert memory.get(valid) is None
