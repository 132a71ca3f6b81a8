"""What a tenant holds against its edition, read off its quota tokens.

The tokens are what the limit is enforced on, so reading them (rather than a
tally kept elsewhere) shows exactly what the next acquire will see,
including a token a crashed acquire left held until it expires.
"""

from __future__ import annotations

from typing import Any

from shared.capacity.editions import edition_of
from shared.capacity.keys import stamp
from shared.capacity.models import PoolKind
from shared.capacity.quota import read_tokens
from shared.capacity.store import CapacityStore
from shared.platform import clock


def tenant_usage(store: CapacityStore, tenant: str) -> dict[str, Any]:
    now = clock.utcnow()
    edition = edition_of(store, tenant)
    kinds: dict[str, Any] = {}
    for kind in PoolKind:
        limit = edition.limit_for(kind)
        held = len(read_tokens(store, tenant, kind, now).live())
        kinds[kind.value] = {"limit": limit, "in_use": held, "available": max(0, limit - held)}
    return {"tenant": tenant, "edition": edition.name, "at": stamp(now), "kinds": kinds}
