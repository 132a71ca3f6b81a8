"""The receipt retention timer: receipts kept write-once for their environment's lifetime plus seven years.

Its schedule is ``RuntimeCloud:Receipts:RetentionSchedule`` (daily by default;
the settings refuse one that leaves more than ``ExtendLeadDays`` between
firings). What one firing does: :mod:`shared.wiring.receipt_retention`.
"""

from __future__ import annotations

import azure.functions as func

from functions.blueprint import trigger_blueprint
from shared.wiring import receipt_retention as wiring
from shared.wiring.settings import setting_binding

bp = trigger_blueprint()


@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:Receipts:RetentionSchedule"),
)
def receipt_retention(timer: func.TimerRequest) -> None:
    wiring.sweep_once()
