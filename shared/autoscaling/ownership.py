"""While an enabled autoscaling policy governs a pool, the autoscaler owns its size.

An administrator's ``PUT /runtime-cloud/pools/{id}`` that changes the size of
such a pool is refused (409 ``autoscaling-owns-size``) rather than let the
policy yield, because a size changed by hand skips what makes a resize safe:
slots added by hand have no resources (no run declared them) and slots
removed by hand are not drained first; and the next evaluation would move
the size back inside the policy anyway. Everything else of the pool (its
``min``/``max``, region) may still change; the policy's bounds are narrowed to
the pool's at each evaluation. To size the pool by hand, disable the policy
(``enabled: false``) first.

Only the capacity store is read, so capacity's trigger can ask without
building provisioning's objects. A policy set at the same moment as a manual
resize can miss it (the check and the pool's write are not one transaction);
the baseline decision then provisions whatever size the pool has.
"""

from __future__ import annotations

from shared.autoscaling import store as rows
from shared.autoscaling.infrastructure import owner_of
from shared.capacity.api import CapacityStore, read_pool
from shared.platform.errors import Conflict

KIND = "autoscaling-owns-size"


def refuse_resize_by_hand(store: CapacityStore, pool_id: str, size: int) -> None:
    """:class:`Conflict` when an enabled policy governs the existing pool and ``size`` is not its size."""
    stored = read_pool(store, pool_id)
    if stored is None or stored.pool.size == size:
        return
    found = rows.read_policy(store, owner_of(stored.pool.tenant), pool_id)
    if found is None or not found[0].enabled:
        return
    policy = found[0]
    raise Conflict(
        KIND,
        f"pool {pool_id} is autoscaled: its size follows its policy ({policy.min_slots}..{policy.max_slots} "
        f"slots). Change the policy's bounds, or disable it (PUT /runtime-cloud/pools/{pool_id}/autoscaling "
        "with enabled false) and then resize the pool by hand.",
    )
