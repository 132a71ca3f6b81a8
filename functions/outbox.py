"""Sends events that a crash left in the outbox, and purges old dispatched rows."""

from __future__ import annotations

from datetime import timedelta

import azure.functions as func

from functions.blueprint import trigger_blueprint
from shared.platform.events.outbox import Outbox, outbox_for
from shared.platform.logs import app_logger
from shared.platform.storage.clients import shared_host_storage
from shared.platform.storage.resources import OUTBOX_TABLES
from shared.wiring.settings import get_settings, setting_binding

bp = trigger_blueprint()
log = app_logger("outbox")

DISPATCHED_RETENTION = timedelta(days=7)  # events live on in the consumers; the outbox only needs to dedupe sends


def outboxes() -> list[Outbox]:
    storage = shared_host_storage()
    source = f"/{get_settings().messaging.service_name}"
    return [outbox_for(storage, table, source) for table in OUTBOX_TABLES]


@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:Outbox:DispatchSchedule"),
)
def outbox_dispatcher(timer: func.TimerRequest) -> None:
    sent = sum(outbox.dispatch_pending() for outbox in outboxes())
    if sent:
        log.info("outbox dispatcher sent %d pending event(s)", sent)


@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:Outbox:PurgeSchedule"),
)
def outbox_purge(timer: func.TimerRequest) -> None:
    purged = sum(outbox.purge_dispatched(DISPATCHED_RETENTION) for outbox in outboxes())
    log.info("outbox purge removed %d dispatched row(s)", purged)
