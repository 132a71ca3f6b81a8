"""Mirrors what the artifacts' outbox holds to KnowledgeHost (receipts, run outputs, drift reports).

Without ``RuntimeCloud:KnowledgeHost:BaseUrl`` nothing is recorded and the
timer does nothing. See :mod:`shared.platform.events.artifact_dispatch` for the order,
retries and dead letters.
"""

from __future__ import annotations

import azure.functions as func

from functions.blueprint import trigger_blueprint
from shared.platform.logs import app_logger
from shared.wiring import neighbours
from shared.wiring.settings import setting_binding

bp = trigger_blueprint()
log = app_logger("knowledge-host")


@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:KnowledgeHost:PublishSchedule"),
)
def artifact_publisher(timer: func.TimerRequest) -> None:
    publisher = neighbours.artifact_publisher()
    if publisher is None:
        return
    report = publisher.publish_pending()
    if report.published or report.failed or report.dead_lettered:
        log.info(
            "artifacts: %d published, %d to retry, %d dead-lettered",
            len(report.published),
            len(report.failed),
            len(report.dead_lettered),
        )
