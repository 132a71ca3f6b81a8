"""The backup timer: export what changed in the store since the last export (``shared.backup``).

Its schedule is ``RuntimeCloud:Backup:Schedule`` (every five minutes by
default; the settings refuse a schedule that fires less often than
``RpoMinutes``). A failed export is logged (one line), counted
(``connectsoft.factory.runtime_cloud.backup.exports``, outcome ``failed``)
and recorded where health reads it (the store's ``BackupState`` table, and
the location's ``status.json`` when the location answers); the next firing
resumes it, unless a restore came in between (a new backup epoch: it starts
afresh). A location that does not answer fails it within about
``RuntimeCloud:Backup:TimeoutSeconds``.
"""

from __future__ import annotations

import azure.functions as func

from functions.blueprint import trigger_blueprint
from shared.wiring import backup as wiring
from shared.wiring.settings import setting_binding

bp = trigger_blueprint()


@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:Backup:Schedule"),
)
def backup_export(timer: func.TimerRequest) -> None:
    wiring.export_once()
