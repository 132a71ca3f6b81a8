"""Editions: how many concurrent leases of each pool kind a tenant may hold.

Editions and tenant assignments live in ``CapacityPools`` (partitions
``editions`` and ``tenant-editions``). The settings seed editions that are
missing; a tenant's edition is, in order: an assignment made through the API,
the ``TenantEditions`` setting, ``DefaultEdition``. Lookups are cached for a
few seconds per process (limits change rarely, every acquire reads them); a
write in this process clears the cache at once.

When ControlPlaneApi is the editions' authority (``store.editions_authority``,
see :mod:`shared.capacity.edition_authority`), an edition's limits are its
answer, and nothing here writes them: :func:`put_edition` raises
:class:`EditionsManagedElsewhere` (409) and seeding does nothing. Which
edition a tenant is in is still decided here, as above (ControlPlaneApi's
contract has no call for it); an edition ControlPlaneApi does not know is
treated as one that no longer exists (the default edition applies).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from shared.capacity.errors import EditionInUse, EditionsManagedElsewhere
from shared.capacity.keys import EDITIONS_PARTITION, TENANT_EDITIONS_PARTITION, stamp, tenant_key
from shared.capacity.models import Edition, EditionSpec, PoolKind
from shared.capacity.store import CapacityStore, query
from shared.platform import clock
from shared.platform.errors import AlreadyExists
from shared.platform.storage.conditional import insert_if_absent, read_row

CACHE_SECONDS = 5.0
T = TypeVar("T")
_cache: dict[str, tuple[float, Any]] = {}
_cache_lock = threading.Lock()


def _cached(key: str, load: Callable[[], T]) -> T:
    """``load()``, or what it answered under ``key`` less than ``CACHE_SECONDS`` ago."""
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
        if hit and now - hit[0] < CACHE_SECONDS:
            return cast(T, hit[1])  # stored below by a load of the same key
    value = load()
    with _cache_lock:
        _cache[key] = (now, value)
    return value


def forget_cached() -> None:
    with _cache_lock:
        _cache.clear()


def _edition_entity(name: str, limits: dict[PoolKind, int]) -> dict[str, Any]:
    return {
        "PartitionKey": EDITIONS_PARTITION,
        "RowKey": name,
        "Name": name,
        "Limits": json.dumps({kind.value: limit for kind, limit in limits.items()}),
        "UpdatedAt": stamp(clock.utcnow()),
    }


def _edition(row: dict[str, Any]) -> Edition:
    return Edition(name=row["Name"], limits={PoolKind(k): int(v) for k, v in json.loads(row["Limits"]).items()})


def seed_editions(store: CapacityStore) -> None:
    if store.editions_authority is not None:
        return  # the authority's editions are not this host's to write
    for name, limits in store.settings.editions.items():
        try:
            insert_if_absent(store.pools, _edition_entity(name, limits))
        except AlreadyExists:
            pass  # an administrator's edition wins over the seed


def list_editions(store: CapacityStore) -> list[Edition]:
    rows = query(store.pools, "PartitionKey eq @pk", pk=EDITIONS_PARTITION)
    return sorted((_edition(row) for row in rows), key=lambda e: e.name)


def visible_editions(store: CapacityStore) -> list[Edition]:
    """Every edition this host knows of, with its limits (the authority's, when it has one).

    With an authority, the names are those the host refers to (the settings' editions, the default,
    tenants' assignments): ControlPlaneApi's contract lists no editions; one it does not know is left out."""
    if store.editions_authority is None:
        known = {e.name: e for e in list_editions(store)}
        for name, limits in store.settings.editions.items():
            known.setdefault(name, Edition(name=name, limits=limits))
        return sorted(known.values(), key=lambda e: e.name)
    names = {store.settings.default_edition, *store.settings.editions, *tenants_by_edition(store)}
    found = (get_edition(store, name) for name in sorted(names))
    return [edition for edition in found if edition is not None]


def get_edition(store: CapacityStore, name: str) -> Edition | None:
    authority = store.editions_authority

    def load() -> Edition | None:
        if authority is not None:
            limits = authority.limits(name)
            return Edition(name=name, limits=limits) if limits is not None else None
        row = read_row(store.pools, EDITIONS_PARTITION, name)
        if row is not None:
            return _edition(row)
        seeded = store.settings.editions.get(name)
        return Edition(name=name, limits=seeded) if seeded is not None else None

    return _cached(f"edition|{name}", load)


def edition_of(store: CapacityStore, tenant: str) -> Edition:
    def load() -> str:
        row = read_row(store.pools, TENANT_EDITIONS_PARTITION, tenant_key(tenant))
        if row is not None:
            return str(row["Edition"])
        return store.settings.tenant_editions.get(tenant, store.settings.default_edition)

    name = _cached(f"tenant|{tenant}", load)
    edition = get_edition(store, name)
    if edition is None:  # an assignment to an edition that no longer exists: the default applies
        edition = get_edition(store, store.settings.default_edition)
    return edition or Edition(name=name, limits={})


def put_edition(store: CapacityStore, name: str, spec: EditionSpec) -> tuple[Edition, bool]:
    """Create or replace an edition and assign ``spec.tenants`` to it. Returns (edition, created).

    Refused (:class:`EditionsManagedElsewhere`) while another service is the editions' authority."""
    if store.editions_authority is not None:
        raise EditionsManagedElsewhere(store.editions_authority.name, store.editions_authority.setting)
    created = read_row(store.pools, EDITIONS_PARTITION, name) is None
    store.pools.upsert_entity(_edition_entity(name, spec.limits))
    for tenant in spec.tenants:
        store.pools.upsert_entity(
            {
                "PartitionKey": TENANT_EDITIONS_PARTITION,
                "RowKey": tenant_key(tenant),
                "Tenant": tenant,
                "Edition": name,
                "UpdatedAt": stamp(clock.utcnow()),
            }
        )
    forget_cached()
    return Edition(name=name, limits=spec.limits), created


def tenants_by_edition(store: CapacityStore) -> dict[str, list[str]]:
    assigned: dict[str, str] = dict(store.settings.tenant_editions)
    for row in query(store.pools, "PartitionKey eq @pk", pk=TENANT_EDITIONS_PARTITION):
        assigned[row["Tenant"]] = row["Edition"]
    grouped: dict[str, list[str]] = {}
    for tenant, edition in sorted(assigned.items()):
        grouped.setdefault(edition, []).append(tenant)
    return grouped


def delete_edition(store: CapacityStore, name: str) -> bool:
    """Delete an edition nobody uses; False when there is no such edition (created through the API).

    :class:`EditionInUse` while tenants are assigned to it, or while it is the default or one the
    settings define (it would be seeded again at the next start); :class:`EditionsManagedElsewhere`
    while another service is the editions' authority."""
    if store.editions_authority is not None:
        raise EditionsManagedElsewhere(store.editions_authority.name, store.editions_authority.setting)
    if read_row(store.pools, EDITIONS_PARTITION, name) is None:
        return False
    if name == store.settings.default_edition or name in store.settings.editions:
        raise EditionInUse(name, "the settings define it (DefaultEdition or Editions)")
    tenants = tenants_by_edition(store).get(name, [])
    if tenants:
        raise EditionInUse(name, f"{len(tenants)} tenant(s) are assigned to it; move them to another edition first")
    store.pools.delete_entity(EDITIONS_PARTITION, name)
    forget_cached()
    return True
