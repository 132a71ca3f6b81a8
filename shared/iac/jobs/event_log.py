"""A job's log: engine events and log lines, streamed into an append blob as JSON lines.

The runner's ``on_event`` callback runs on the Automation API's watcher
thread, so lines are buffered and appended in blocks (one append per
``flush_every`` lines or at :meth:`close`): a 2,000-resource update writes a
few dozen blocks, not thousands. Engine events carry no secret values (the
engine shows secrets as ``[secret]``); log lines name configuration keys only.

The log keeps the SHA-256 of what it appended (:attr:`EventLog.sha256`), which
the job's result records and the host checks before the receipt names the
log. Each block is appended at the position the log expects
(``appendpos_condition``), so a block the SDK sends again after a lost answer
is never appended twice and the digest stays the blob's; the same makes a block
safe to send again after a store outage, which the job's log waits out
(``outage``, :mod:`.outage`) rather than failing the job's engine callback.
"""

from __future__ import annotations

import hashlib
import json
import threading
from enum import Enum
from typing import Any

from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import ContainerClient

from shared.iac.jobs.outage import StoreOutage
from shared.platform.logs import app_logger

logger = app_logger("runner_job")

MAX_BLOCK = 4 * 1024 * 1024  # an append block may hold 4 MiB


class EventLog:
    def __init__(
        self, container: ContainerClient, blob_name: str, flush_every: int = 200, outage: StoreOutage | None = None
    ) -> None:
        self.blob_name = blob_name
        self._outage = outage or StoreOutage(0.0)
        self._blob = container.get_blob_client(blob_name)
        self._flush_every = flush_every
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._digest = hashlib.sha256()
        self._size = 0  # bytes appended so far: where the next block goes
        self.count = 0

    @property
    def sha256(self) -> str | None:
        """The digest of what the log holds (call after :meth:`close`); None when nothing was written."""
        with self._lock:
            return self._digest.hexdigest() if self._size else None

    def event(self, event: Any) -> None:
        """An engine event (``pulumi.automation.events.EngineEvent``), with every field the engine sent."""
        self._append({"engine_event": plain(event)})

    def line(self, text: str) -> None:
        self._append({"log": text})

    def _append(self, document: dict[str, Any]) -> None:
        with self._lock:
            self._lines.append(json.dumps(document, sort_keys=True, default=str))
            self.count += 1
            if len(self._lines) >= self._flush_every:
                self._flush_locked()

    def close(self) -> None:
        """Write what is buffered; a log that cannot be written is reported, never the job's failure."""
        with self._lock:
            try:
                self._flush_locked()
            except Exception as error:  # noqa: BLE001 - the result, not the log, is the job's record
                logger.warning("the job log %s could not be written: %s", self.blob_name, type(error).__name__)

    def _flush_locked(self) -> None:
        lines, self._lines = self._lines, []
        if not lines:
            return
        data = ("\n".join(lines) + "\n").encode()
        for start in range(0, len(data), MAX_BLOCK):
            block = data[start : start + MAX_BLOCK]
            self._outage.ride_out("the job's log", lambda: self._append_block(block))  # noqa: B023 - called at once

    def _append_block(self, block: bytes) -> None:
        try:
            self._append_at(block)
        except ResourceNotFoundError:  # the first block of this job's log
            try:
                self._blob.create_append_blob()
            except ResourceExistsError:
                pass
            self._append_at(block)
        self._digest.update(block)
        self._size += len(block)

    def _append_at(self, block: bytes) -> None:
        try:
            self._blob.append_block(block, appendpos_condition=self._size)
        except HttpResponseError as error:
            # Refused at this position: a retry of a block that did land (the log ends right after it) is done.
            landed = error.status_code == 412 and self._blob.get_blob_properties().size == self._size + len(block)
            if not landed:
                raise


def plain(value: Any) -> Any:
    """An engine event object as plain JSON values (``None`` fields left out, enums as their values)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items() if item is not None}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if hasattr(value, "__dict__"):
        return {key: plain(item) for key, item in vars(value).items() if item is not None and not key.startswith("_")}
    return value
