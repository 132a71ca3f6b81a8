"""Lease expiry: one eternal Durable orchestration per pool, sweeping expired leases.

``capacity_lease_expiry`` (instance id ``capacity-expiry-{pool}``) calls the
``capacity_sweep_expired`` activity, sleeps ``SweepIntervalSeconds`` on a
durable timer and continues as new, so its history never grows. The
orchestrator is deterministic: the sweep (all I/O) is the activity, time
comes from ``context.current_utc_datetime``, and the interval travels in the
input rather than being read from settings during replay. The activity is
idempotent: every change it makes is conditional on the slot row's ETag (see
:mod:`shared.capacity.sweeper`).

``capacity_expiry_starter`` (a timer, also at start) makes sure every pool
has its orchestration running; starting is idempotent because the instance id
is fixed per pool and a running instance is left alone. Nothing about lease
correctness waits for this orchestration: an expired slot is taken by the
next acquirer whether or not it was swept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import azure.durable_functions as df
import azure.functions as func

from orchestrations.starting import ACTIVE, start_once
from shared.capacity.api import list_pools, sweep_pool
from shared.platform.logs import app_logger
from shared.wiring import capacity as wiring
from shared.wiring.settings import setting_binding

bp = df.Blueprint()
log = app_logger("capacity")

ORCHESTRATOR = "capacity_lease_expiry"
SWEEP_ACTIVITY = "capacity_sweep_expired"
SWEEP_RETRY = df.RetryOptions(first_retry_interval_in_milliseconds=2000, max_number_of_attempts=3)


def instance_id_for(pool_id: str) -> str:
    return f"capacity-expiry-{pool_id}"


@dataclass(frozen=True)
class ExpiryOrder:
    """The orchestration's input: which pool, how often. One typed object so fields can be added."""

    pool: str
    interval_seconds: int
    periods: int = 0  # periods run over the instance's lifetime (carried across continue-as-new)

    @classmethod
    def parse(cls, value: Any) -> ExpiryOrder:
        data = dict(value or {})
        return cls(
            pool=str(data["pool"]),
            interval_seconds=int(data.get("interval_seconds", 30)),
            periods=int(data.get("periods", 0)),
        )


@dataclass(frozen=True)
class SweepRequest:
    pool: str


@bp.orchestration_trigger(context_name="context", orchestration=ORCHESTRATOR)
def capacity_lease_expiry(context: df.DurableOrchestrationContext) -> Generator[Any, Any, Any]:
    order = ExpiryOrder.parse(context.get_input())
    try:
        result = yield context.call_activity_with_retry(SWEEP_ACTIVITY, SWEEP_RETRY, asdict(SweepRequest(order.pool)))
        context.set_custom_status({"last_sweep": result, "periods": order.periods + 1})
    except Exception as error:  # noqa: BLE001 - the store was down: try again next period, stay alive
        context.set_custom_status({"last_error": str(error)[:200], "periods": order.periods + 1})
    yield context.create_timer(context.current_utc_datetime + timedelta(seconds=order.interval_seconds))
    context.continue_as_new(asdict(ExpiryOrder(order.pool, order.interval_seconds, order.periods + 1)))
    return None


@bp.activity_trigger(input_name="request", activity=SWEEP_ACTIVITY)
def capacity_sweep_expired(request: dict) -> dict[str, Any]:
    order = SweepRequest(**request)
    return sweep_pool(wiring.store(), order.pool).as_dict()


async def ensure_expiry_sweep(client: df.DurableOrchestrationClient, pool_id: str, interval_seconds: int) -> bool:
    """Start the pool's orchestration unless it runs (a finished one is started again). True if this call
    started it."""
    return await start_once(
        client,
        orchestrator=ORCHESTRATOR,
        instance_id=instance_id_for(pool_id),
        document=asdict(ExpiryOrder(pool_id, interval_seconds)),
        present_when=ACTIVE,
    )


# No run_on_startup (each instance start of a scale-to-zero plan would run it): the sweep only
# frees slots nobody asks for, so its first start may wait for the schedule.
@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:Capacity:ExpiryStarterSchedule"),
)
@bp.durable_client_input(client_name="client")
async def capacity_expiry_starter(timer: func.TimerRequest, client: df.DurableOrchestrationClient) -> None:
    store = wiring.store()
    pool_ids = await asyncio.to_thread(lambda: [pool.id for pool in list_pools(store)])
    started = 0
    for pool_id in pool_ids:
        started += await ensure_expiry_sweep(client, pool_id, store.settings.sweep_interval_seconds)
    if started:
        log.info("started the expiry sweep of %d pool(s)", started)
