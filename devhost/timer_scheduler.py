"""Timer triggers on 6-field NCRONTAB schedules (``{second} {minute} {hour} {day} {month} {day-of-week}``).

As in the Functions host, each timer's schedule status (last and next
occurrence) is kept in the host's storage account, under
``azure-webjobs-hosts/timers/{host id}/{function}/status``. A host that was
down when an occurrence was due runs the function once at start with
``past_due`` set, then follows the schedule.

Each timer runs on one host at a time, the one holding its listener lock
(:mod:`devhost.timer_lock`); the others wait for it. The holder reads the
schedule status when it takes the lock, so a host taking over from one that
was killed runs a missed occurrence once (past due) and no occurrence twice.

A schedule may be a ``%Name%`` reference to an app setting, resolved as the
Functions host resolves it (:mod:`devhost.app_settings`). A reference that
resolves to nothing, or a value that is not an NCRONTAB expression the host
would accept, stops the host at start naming the function and the setting.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypedDict

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.functions.timer import TimerRequest
from azure.storage.blob.aio import BlobServiceClient
from croniter import croniter

from devhost.app_settings import UnresolvedAppSetting, resolve_references
from devhost.catalog import FunctionInfo
from devhost.config import SingletonOptions
from devhost.invoker import Invoker
from devhost.timer_lock import ListenerLock
from storage_protocol.client_options import client_options

log = logging.getLogger("devhost.timers")

STATUS_CONTAINER = "azure-webjobs-hosts"


# NCRONTAB as the Functions host parses it: six fields, seconds first, these bounds, month and
# day names; no 'L', '#', '?' nor day-of-week 7, which croniter alone would accept.
_BOUNDS = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_NAMES = {4: "jan feb mar apr may jun jul aug sep oct nov dec".split(), 5: "sun mon tue wed thu fri sat".split()}
_ITEM = re.compile(r"(?P<start>\*|\d+|[a-z]{3})(?:-(?P<end>\d+|[a-z]{3}))?(?:/(?P<step>[1-9]\d*))?")
_REFERENCE = re.compile(r"%([^%]+)%")


class Schedule:
    """A 6-field NCRONTAB expression, the only schedule form a Flex Consumption app may use.

    The Functions host also takes ``hh:mm:ss`` intervals, but only on App
    Service plans; this app runs on Flex Consumption, so the local host refuses
    them rather than accept what Azure would not run.
    """

    def __init__(self, expression: str) -> None:
        self.expression = expression.strip()
        if re.fullmatch(r"(\d+\.)?\d{1,2}:\d{2}:\d{2}", self.expression):
            raise ValueError(
                f"{expression!r} is a time-span schedule, which Azure runs only on App Service "
                "plans; write it as a 6-field NCRONTAB expression for Flex Consumption"
            )
        if not _is_ncrontab(self.expression):
            raise ValueError(
                f"not a 6-field NCRONTAB expression (second minute hour day month day-of-week): {expression!r}"
            )

    def next_after(self, moment: datetime) -> datetime:
        return croniter(self.expression, moment, second_at_beginning=True).get_next(datetime)


def _is_ncrontab(expression: str) -> bool:
    fields = expression.split()
    return (
        len(fields) == 6
        and all(_is_item(index, item) for index, field in enumerate(fields) for item in field.lower().split(","))
        and croniter.is_valid(expression, second_at_beginning=True)
    )


def _is_item(index: int, item: str) -> bool:
    match = _ITEM.fullmatch(item)
    if match is None or (match["start"] == "*" and match["end"] is not None):
        return False
    low, high = _BOUNDS[index]
    values = []
    for part in (match["start"], match["end"]):
        if part is None or part == "*":
            continue
        if not part.isdigit() and part not in _NAMES.get(index, ()):
            return False
        values.append(int(part) if part.isdigit() else _NAMES[index].index(part) + low)
    return all(low <= value <= high for value in values) and values == sorted(values)


def resolve_schedule(function: FunctionInfo) -> Schedule:
    """The function's schedule, its ``%Name%`` references resolved; refuses what the Functions host would."""
    from devhost.host import StartupError  # (the host imports this module)

    declared = str(function.trigger.get("schedule") or "")
    names = _REFERENCE.findall(declared)
    source = f" (app setting {', '.join(n.replace(':', '__') for n in names)})" if names else ""
    try:
        return Schedule(resolve_references(declared))
    except UnresolvedAppSetting as error:
        raise StartupError(f"timer function {function.name}: {error}") from None
    except ValueError as error:
        raise StartupError(f"timer function {function.name}: schedule {declared}{source} is invalid: {error}") from None


class ScheduleStatusJson(TypedDict):
    """A timer's schedule status, as its blob holds it and as ``TimerRequest.schedule_status`` shows it."""

    Last: str | None
    Next: str | None
    LastUpdated: str | None


@dataclass
class ScheduleStatus:
    last: datetime | None
    next: datetime | None

    def as_dict(self, now: datetime) -> ScheduleStatusJson:
        return {"Last": _iso(self.last), "Next": _iso(self.next), "LastUpdated": _iso(now)}


class TimerRunner:
    def __init__(
        self,
        function: FunctionInfo,
        invoker: Invoker,
        host_id: str,
        singleton: SingletonOptions | None = None,
    ) -> None:
        trigger = function.trigger
        self.function = function
        self.schedule = resolve_schedule(function)
        self._run_on_startup = bool(trigger.get("runOnStartup", False))
        self._invoker = invoker
        self._host_id = host_id
        self._singleton = singleton or SingletonOptions()
        self._blob_name = f"timers/{host_id}/{function.name}/status"

    async def run(self) -> None:
        """Fire on schedule while this host holds the timer's listener lock (waiting for it first).
        A lost lock ends the run with :class:`ListenerLockLost`; the host starts it again, to wait."""
        async with timer_blob_service() as service:
            lock = ListenerLock(service, self._host_id, self.function.name, self._singleton)
            await lock.acquire()
            keeper = asyncio.create_task(lock.keep(), name=f"listener lock of {self.function.name}")
            firing = asyncio.create_task(self._follow_schedule(service), name=f"schedule of {self.function.name}")
            try:
                done, _ = await asyncio.wait({keeper, firing}, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()
            finally:
                for task in (keeper, firing):
                    task.cancel()
                await asyncio.gather(keeper, firing, return_exceptions=True)
                await asyncio.shield(lock.release())

    async def _follow_schedule(self, service: BlobServiceClient) -> None:
        status = await self._read_status(service)
        now = _now()
        if (status.next and status.next < now) or self._run_on_startup:
            await self._fire(status, past_due=bool(status.next and status.next < now))
        while True:
            now = _now()
            due = self.schedule.next_after(now)
            status.next = due
            await self._write_status(service, status)  # with the last occurrence fired, if any: one write each
            await asyncio.sleep(max(0.0, (due - _now()).total_seconds()))
            await self._fire(status, past_due=False)

    async def _fire(self, status: ScheduleStatus, past_due: bool) -> None:
        request = TimerRequest(
            past_due=past_due,
            schedule_status=dict(status.as_dict(_now())),
            schedule={"AdjustForDST": True},
        )
        status.last = _now()
        try:
            await self._invoker.invoke(self.function, request)
        except Exception:
            log.exception("timer function %s failed", self.function.name)

    async def _read_status(self, service: BlobServiceClient) -> ScheduleStatus:
        try:
            blob = service.get_blob_client(STATUS_CONTAINER, self._blob_name)
            document = json.loads(await (await blob.download_blob()).readall())
            return ScheduleStatus(_parse(document.get("Last")), _parse(document.get("Next")))
        except ResourceNotFoundError:
            return ScheduleStatus(None, None)

    async def _write_status(self, service: BlobServiceClient, status: ScheduleStatus) -> None:
        """On the runner's client (one connection pool for its life)."""
        try:
            await write_status_blob(service, self._blob_name, json.dumps(status.as_dict(_now())))
        except Exception as error:  # noqa: BLE001 - a missed status write only costs a past-due run later
            log.warning("could not record schedule status of %s: %s", self.function.name, error)


async def write_status_blob(service: BlobServiceClient, blob_name: str, document: str) -> None:
    """Write a schedule status blob, creating its container only when the write finds it missing, not before
    every write (an idle host wrote a status every few seconds). The listener lock's blob usually made the
    container first; this is for one deleted while the host runs."""
    blob = service.get_blob_client(STATUS_CONTAINER, blob_name)
    try:
        await blob.upload_blob(document, overwrite=True)
    except ResourceNotFoundError:  # the container (the blob itself need not exist to be written)
        try:
            await service.create_container(STATUS_CONTAINER)
        except ResourceExistsError:
            pass
        await blob.upload_blob(document, overwrite=True)


def admin_timer_request() -> TimerRequest:
    return TimerRequest(past_due=False, schedule_status={}, schedule={"AdjustForDST": True})


def timer_blob_service() -> BlobServiceClient:
    return BlobServiceClient.from_connection_string(os.environ["AzureWebJobsStorage"], **client_options())


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _parse(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None
