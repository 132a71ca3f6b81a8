"""What other features and the triggers may use of capacity: pools, edition quotas and fenced leases.

Other features, the triggers (``functions/``, ``orchestrations/``), health and the runner job
import only this module of the package; only the composition root (``shared/wiring``) reaches
inside (the "api-only" contract in pyproject.toml).
"""

from __future__ import annotations

# modules whose functions the triggers and backup call by module name (pools.read_pool, epoch.fencing_jump)
from shared.capacity import editions, epoch, pools
from shared.capacity.denials import recent_denials
from shared.capacity.draining import live_leases, set_draining
from shared.capacity.errors import (
    CapacityUnavailable,
    ContentionExhausted,
    EditionInUse,
    EditionsManagedElsewhere,
    KindNotInEdition,
    LeaseIdInUse,
    LeaseLost,
    LeaseNotFound,
    NoMatchingPool,
    PoolChangeRefused,
    PoolNotFound,
    QuotaExceeded,
    QuotasUnavailable,
)
from shared.capacity.keys import POOLS_TABLE, after, parse_stamp, stamp, tenant_key
from shared.capacity.measures import measured_acquire
from shared.capacity.models import (
    EDITION_NAME,
    LEASE_ID,
    POOL_ID,
    AcquireRequest,
    EditionSpec,
    LeaseView,
    Pool,
    PoolSpec,
    PoolView,
    RenewRequest,
    with_ttl_bound,
)
from shared.capacity.pools import list_pools, put_pool, read_pool
from shared.capacity.responses import (
    EditionSaved,
    LeaseList,
    LeasesQuery,
    PoolList,
    PoolsQuery,
    QuotasView,
    TenantUsage,
)
from shared.capacity.retention import purge_expired_history
from shared.capacity.store import CapacityStore
from shared.capacity.sweeper import sweep_pool
from shared.capacity.usage import tenant_usage

__all__ = [
    "pools",
    "epoch",
    "editions",
    "AcquireRequest",
    "CapacityStore",
    "CapacityUnavailable",
    "ContentionExhausted",
    "EDITION_NAME",
    "EditionInUse",
    "EditionSaved",
    "EditionSpec",
    "EditionsManagedElsewhere",
    "KindNotInEdition",
    "LEASE_ID",
    "LeaseIdInUse",
    "LeaseList",
    "LeaseLost",
    "LeaseNotFound",
    "LeaseView",
    "LeasesQuery",
    "NoMatchingPool",
    "POOLS_TABLE",
    "POOL_ID",
    "Pool",
    "PoolChangeRefused",
    "PoolList",
    "PoolNotFound",
    "PoolSpec",
    "PoolView",
    "PoolsQuery",
    "QuotaExceeded",
    "QuotasUnavailable",
    "QuotasView",
    "RenewRequest",
    "TenantUsage",
    "after",
    "list_pools",
    "live_leases",
    "measured_acquire",
    "parse_stamp",
    "purge_expired_history",
    "put_pool",
    "read_pool",
    "recent_denials",
    "set_draining",
    "stamp",
    "sweep_pool",
    "tenant_key",
    "tenant_usage",
    "with_ttl_bound",
]
