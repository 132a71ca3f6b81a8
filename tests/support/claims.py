"""The claims of a development token, for tests that sign tokens themselves (hostile or unusual ones)."""

from __future__ import annotations

import time
from typing import Any


def claims(**overrides: Any) -> dict[str, Any]:
    """A valid token's claims for tenant-a with the health scope, overridden field by field."""
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": "runtime-cloud-local-issuer",
        "aud": "api://runtime-cloud",
        "sub": "c",
        "azp": "c",
        "tid": "tenant-a",
        "scp": "factory.health.read",
        "iat": now,
        "nbf": now,
        "exp": now + 600,
    }
    base.update(overrides)
    return base
