"""Identifiers that callers choose and that end up in table keys.

Azure Table keys refuse ``/ \\ # ?`` and control characters and hold at most
1 KiB, so every id a caller or a message supplies is checked against one of
these patterns before it reaches a key: a bad one is a 4xx answer (or a
rejection record), never a storage error.
"""

from __future__ import annotations

import re

# A tenant id: what the token's tenant claim must look like, and every key's first part.
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
# An Idempotency-Key header or a promotion id: printable ASCII that table keys can hold.
IDEMPOTENCY_KEY_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@+=~-]{0,199}$"

TENANT = re.compile(TENANT_PATTERN)
IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)


def is_tenant(value: object) -> bool:
    return isinstance(value, str) and TENANT.fullmatch(value) is not None


def is_idempotency_key(value: object) -> bool:
    return isinstance(value, str) and IDEMPOTENCY_KEY.fullmatch(value) is not None
