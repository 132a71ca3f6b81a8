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
from dataclasses import dataclass
from datetime import timedelta
from typing import TypedDict

import azure.functions as func

from orchestrations.durable import Activity, DurableClient, OrchestrationContext, Steps, blueprint, retry_options
from orchestrations.starting import ACTIVE, start_once
from shared.capacity.api import list_pools, sweep_pool
from shared.platform.logs import app_logger
from shared.wiring import capacity as wiring
from shared.wiring.settings import setting_binding

bp = blueprint()
log = app_logger("capacity")

ORCHESTRATOR = "capacity_lease_expiry"
SWEEP_RETRY = retry_options(first_retry_ms=2000, max_attempts=3)


def instance_id_for(pool_id: str) -> str:
    return f"capacity-expiry-{pool_id}"


class ExpiryDocument(TypedDict):
    """The orchestration's input as its history holds it (see :class:`ExpiryOrder`)."""

    pool: str
    interval_seconds: int
    periods: int


@dataclass(frozen=True)
class ExpiryOrder:
    """The orchestration's input: which pool, how often. One typed object so fields can be added."""

    pool: str
    interval_seconds: int
    periods: int = 0  # periods run over the instance's lifetime (carried across continue-as-new)

    @classmethod
    def parse(cls, value: object) -> ExpiryOrder:
        """The input of any version (one from before ``periods`` has none)."""
        data = dict(value) if isinstance(value, dict) else {}
        return cls(
            pool=str(data["pool"]),
            interval_seconds=int(data.get("interval_seconds", 30)),
            periods=int(data.get("periods", 0)),
        )

    def document(self) -> ExpiryDocument:
        return {"pool": self.pool, "interval_seconds": self.interval_seconds, "periods": self.periods}


class SweepRequest(TypedDict):
    pool: str


class SweepReport(TypedDict):
    """What a sweep did (the orchestration shows it in its custom status)."""

    pool: str
    expired: int  # expired leases ended (their slots and quota freed)
    contended: int  # renewed, released or taken over meanwhile: not the sweep's to end


class ExpiryStatus(TypedDict, total=False):
    """The orchestration's custom status after each period: the sweep's report, or why it failed."""

    last_sweep: SweepReport
    last_error: str  # the failure's text, cut to 200 characters
    periods: int  # the periods run, this one included


SWEEP = Activity[SweepRequest, SweepReport]("capacity_sweep_expired", SWEEP_RETRY)
SWEEP_ACTIVITY = SWEEP.name


@bp.orchestration_trigger(context_name="context", orchestration=ORCHESTRATOR)
def capacity_lease_expiry(context: OrchestrationContext) -> Steps[None]:
    order = ExpiryOrder.parse(context.get_input())
    try:
        result = yield from SWEEP.call(context, {"pool": order.pool})
        status: ExpiryStatus = {"last_sweep": result, "periods": order.periods + 1}
    except Exception as error:  # noqa: BLE001 - the store was down: try again next period, stay alive
        status = {"last_error": str(error)[:200], "periods": order.periods + 1}
    context.set_custom_status(status)
    yield context.create_timer(context.current_utc_datetime + timedelta(seconds=order.interval_seconds))
    context.continue_as_new(ExpiryOrder(order.pool, order.interval_seconds, order.periods + 1).document())
    return None


@SWEEP.trigger(bp, input_name="request")
def capacity_sweep_expired(request: SweepRequest) -> SweepReport:
    swept = sweep_pool(wiring.store(), request["pool"])
    return {"pool": swept.pool, "expired": swept.expired, "contended": swept.contended}


async def ensure_expiry_sweep(client: DurableClient, pool_id: str, interval_seconds: int) -> bool:
    """Start the pool's orchestration unless it runs (a finished one is started again). True if this call
    started it."""
    return await start_once(
        client,
        orchestrator=ORCHESTRATOR,
        instance_id=instance_id_for(pool_id),
        document=ExpiryOrder(pool_id, interval_seconds).document(),
        present_when=ACTIVE,
    )


# No run_on_startup (each instance start of a scale-to-zero plan would run it): the sweep only
# frees slots nobody asks for, so its first start may wait for the schedule.
@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:Capacity:ExpiryStarterSchedule"),
)
@bp.durable_client_input(client_name="client")
async def capacity_expiry_starter(timer: func.TimerRequest, client: DurableClient) -> None:
    store = wiring.store()
    pool_ids = await asyncio.to_thread(lambda: [pool.id for pool in list_pools(store)])
    started = 0
    for pool_id in pool_ids:
        started += await ensure_expiry_sweep(client, pool_id, store.settings.sweep_interval_seconds)
    if started:
        log.info("started the expiry sweep of %d pool(s)", started)
