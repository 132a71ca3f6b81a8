"""A run's log, read over HTTP: its runner jobs' engine events and log lines, page by page.

Each runner job streams its log into ``runner-jobs/{tenant}/{environment}/{run}/{job}/events.jsonl``
(:mod:`shared.iac.jobs.event_log`: JSON lines, appended in blocks while it runs). A run's log is
those blobs in the order its jobs ran (plan attempts, then apply attempts). A page is read by
byte range and ends at a line's end, so it is bounded (``PAGE_BYTES``) whatever the
environment's size, and the response never holds a whole log. The cursor says where the next
page starts (``<job id>:<byte offset>``); at the end of the last job's log of a run that has not
ended, the cursor stays where it is, so a caller polls it to follow the run (``complete`` is
true once the run ended and every log is read).

The run is the caller's tenant's (the caller passes the run found under the token's tenant):
another tenant's run is not found before any log is read.
"""

from __future__ import annotations

import json
import re
from typing import Any

from shared.iac.api import JobRecord, JobStore
from shared.platform.errors import InvalidInput
from shared.platform.storage.clients import StorageClients
from shared.provisioning.runs import Run

PAGE_BYTES = 256 * 1024
MAX_LINE_BYTES = 4 * 1024 * 1024  # an append block; no line the job writes is longer
CURSOR = re.compile(r"^(?P<job>[A-Za-z0-9._-]{1,200}):(?P<offset>\d{1,12})$")


class RunLog:
    def __init__(self, storage: StorageClients) -> None:
        self._jobs = JobStore(storage)

    def page(self, run: Run, cursor: str | None) -> dict[str, Any]:
        jobs = self._jobs.run_jobs(run.id)
        index, offset = _position(jobs, cursor)
        entries: list[dict[str, Any]] = []
        budget = PAGE_BYTES
        while index < len(jobs) and budget > 0:
            job_id = jobs[index].job_id
            data = self._lines(run, job_id, offset, budget)
            entries.extend({"job_id": job_id, **_entry(line)} for line in data.splitlines())
            offset, budget = offset + len(data), budget - len(data)
            if data:
                continue  # read on in this log while the page has room
            if index == len(jobs) - 1:
                break  # the last job's log may still grow: the cursor waits at its end
            index, offset = index + 1, 0  # a later job exists, so this one finished or died: its log is whole
        return {
            "run_id": run.id,
            "jobs": [{"job_id": job.job_id, "attempt": job.attempt, "state": job.state} for job in jobs],
            "entries": entries,
            "next": f"{jobs[index].job_id}:{offset}" if jobs else None,
            # Everything is read once a page of an ended run finds nothing new.
            "complete": run.state.is_final and not entries,
        }

    def _lines(self, run: Run, job_id: str, offset: int, budget: int) -> bytes:
        """Whole lines from ``offset``, at most ``budget`` bytes unless one line is longer (then that line)."""
        length = budget
        while True:
            data = self._jobs.read_log(run.tenant, run.environment, run.id, job_id, offset, length)
            end = data.rfind(b"\n")
            if end >= 0:
                return data[: end + 1]
            if len(data) < length or length >= MAX_LINE_BYTES:
                return b""  # no whole line yet (the job appends in blocks of whole lines)
            length = min(MAX_LINE_BYTES, length * 2)


def _position(jobs: list[JobRecord], cursor: str | None) -> tuple[int, int]:
    if not cursor:
        return 0, 0
    match = CURSOR.fullmatch(cursor)
    ids = [job.job_id for job in jobs]
    if match is None or match["job"] not in ids:
        raise InvalidInput([{"path": "/cursor", "message": "not a cursor this run's log gave"}])
    return ids.index(match["job"]), int(match["offset"])


def _entry(line: bytes) -> dict[str, Any]:
    try:
        document = json.loads(line)
    except ValueError:
        return {"log": line.decode("utf-8", errors="replace")}
    return document if isinstance(document, dict) else {"log": str(document)}
