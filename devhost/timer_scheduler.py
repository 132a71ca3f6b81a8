"""Timer triggers on 6-field NCRONTAB schedules (``{second} {minute} {hour} {day} {month} {day-of-week}``).

As in the Functions host, each timer's schedule status (last and next
occurrence) is kept in the host's storage account, under
``azure-webjobs-hosts/timers/{host id}/{function}/status``. A host that was
down when an occurrence was due runs the function once at start with
``past_due`` set, then follows the schedule.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from azure.functions.timer import TimerRequest
from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.blob.aio import BlobServiceClient
from croniter import croniter

from devhost.catalog import FunctionInfo
from devhost.config import parse_timespan, resolve_app_setting_references
from devhost.invoker import Invoker

log = logging.getLogger("devhost.timers")

STATUS_CONTAINER = "azure-webjobs-hosts"


class Schedule:
    """A 6-field NCRONTAB expression or an ``hh:mm:ss`` interval."""

    def __init__(self, expression: str) -> None:
        self.expression = expression.strip()
        self._interval: timedelta | None = None
        if re.fullmatch(r"(\d+\.)?\d{1,2}:\d{2}:\d{2}", self.expression):
            self._interval = timedelta(seconds=parse_timespan(self.expression, 0))
            if self._interval <= timedelta(0):
                raise ValueError(f"timer interval must be positive: {expression!r}")
        elif len(self.expression.split()) != 6 or not croniter.is_valid(self.expression, second_at_beginning=True):
            raise ValueError(f"not a 6-field NCRONTAB expression: {expression!r}")

    def next_after(self, moment: datetime) -> datetime:
        if self._interval is not None:
            return moment + self._interval
        return croniter(self.expression, moment, second_at_beginning=True).get_next(datetime)


@dataclass
class ScheduleStatus:
    last: datetime | None
    next: datetime | None

    def as_dict(self, now: datetime) -> dict[str, Any]:
        return {"Last": _iso(self.last), "Next": _iso(self.next), "LastUpdated": _iso(now)}


class TimerRunner:
    def __init__(self, function: FunctionInfo, invoker: Invoker, host_id: str) -> None:
        trigger = function.trigger
        self.function = function
        self.schedule = Schedule(resolve_app_setting_references(trigger["schedule"]))
        self._run_on_startup = bool(trigger.get("runOnStartup", False))
        self._invoker = invoker
        self._blob_name = f"timers/{host_id}/{function.name}/status"

    async def run(self) -> None:
        status = await self._read_status()
        now = _now()
        if (status.next and status.next < now) or self._run_on_startup:
            await self._fire(status, past_due=bool(status.next and status.next < now))
        while True:
            now = _now()
            due = self.schedule.next_after(now)
            status.next = due
            await self._write_status(status)
            await asyncio.sleep(max(0.0, (due - _now()).total_seconds()))
            await self._fire(status, past_due=False)

    async def _fire(self, status: ScheduleStatus, past_due: bool) -> None:
        request = TimerRequest(
            past_due=past_due,
            schedule_status=status.as_dict(_now()),
            schedule={"AdjustForDST": True},
        )
        status.last = _now()
        try:
            await self._invoker.invoke(self.function, request)
        except Exception:
            log.exception("timer function %s failed", self.function.name)
        await self._write_status(status)

    async def _read_status(self) -> ScheduleStatus:
        try:
            async with _blob_service() as service:
                blob = service.get_blob_client(STATUS_CONTAINER, self._blob_name)
                document = json.loads(await (await blob.download_blob()).readall())
            return ScheduleStatus(_parse(document.get("Last")), _parse(document.get("Next")))
        except ResourceNotFoundError:
            return ScheduleStatus(None, None)

    async def _write_status(self, status: ScheduleStatus) -> None:
        try:
            async with _blob_service() as service:
                try:
                    await service.create_container(STATUS_CONTAINER)
                except ResourceExistsError:
                    pass
                blob = service.get_blob_client(STATUS_CONTAINER, self._blob_name)
                await blob.upload_blob(json.dumps(status.as_dict(_now())), overwrite=True)
        except Exception as error:  # a missed status write only costs a past-due run later
            log.warning("could not record schedule status of %s: %s", self.function.name, error)


def admin_timer_request() -> TimerRequest:
    return TimerRequest(past_due=False, schedule_status={}, schedule={"AdjustForDST": True})


def _blob_service() -> BlobServiceClient:
    return BlobServiceClient.from_connection_string(os.environ["AzureWebJobsStorage"])


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _parse(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None
