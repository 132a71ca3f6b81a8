"""A stack lock left in a self-managed backend by a runner job that died: found, proven dead, cleared.

With a self-managed backend (``azblob://`` in Azure, ``file://`` locally) the
CLI locks a stack for an update by writing a blob,
``.pulumi/locks/organization/<project>/<stack>/<id>.json`` (``.pulumi/locks/<stack>/``
for backends without project-scoped stacks), holding ``{"pid", "username",
"hostname", "timestamp"}``, and deletes it when the update ends. A job killed
mid-update never deletes it, and every later update of the stack fails
"the stack is currently locked". ``pulumi cancel`` only reaches the Pulumi
Cloud service backend; here the lock is just a blob.

**When a lock is removed** -- only when its owner is *proven* dead:

1. the lock is older than the job staleness limit (``JobStaleSeconds``: no
   live job goes that long without a heartbeat), and
2. the jobs that could hold it are known and none of them lives: the jobs of
   this stack's tenant and environment (one stack per tenant and environment,
   :mod:`shared.iac.stacks`) that ran on the lock's host and were claimed no
   later than the lock was taken, each one finished or dead per its row
   (:mod:`shared.iac.jobs.liveness`). The lock's pid is the CLI's, not the
   job's, so the host and the time name the owner.

A lock whose owner is unknown (an operator's ``pulumi up`` from a laptop, a
job of another installation) or alive is left alone and reported: the update
then fails "locked by another update", naming it, and an operator decides.
Every lock found is reported in the run's log and apply receipt, removed or
not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol
from urllib.parse import urlparse

from shared.platform import clock
from shared.platform.logs import app_logger

logger = app_logger("iac")

OwnerState = Literal["dead", "alive", "unknown"]
# Who held a lock taken on ``hostname`` at ``locked_at``, and why we think so.
LockOwners = Callable[[str, datetime], tuple[OwnerState, str]]


@dataclass(frozen=True)
class StackLock:
    name: str  # the blob (or file) that is the lock
    hostname: str
    pid: int | None
    locked_at: datetime


class LockStore(Protocol):
    def locks(self, project: str, stack: str) -> list[StackLock]: ...

    def remove(self, lock: StackLock) -> None: ...


def lock_prefixes(project: str, stack: str) -> tuple[str, ...]:
    return (f".pulumi/locks/organization/{project}/{stack}/", f".pulumi/locks/{stack}/")


def parse_lock(name: str, data: bytes) -> StackLock | None:
    """A lock blob's content; None when it is not one (never removed: we cannot say whose it is)."""
    try:
        content = json.loads(data)
        moment = datetime.fromisoformat(str(content["timestamp"]).replace("Z", "+00:00"))
    except (ValueError, KeyError, TypeError):
        return None
    pid = content.get("pid")
    return StackLock(
        name=name,
        hostname=str(content.get("hostname") or ""),
        pid=int(pid) if isinstance(pid, int) else None,
        locked_at=moment if moment.tzinfo else moment.replace(tzinfo=UTC),
    )


class BlobLockStore:
    """Locks in an ``azblob://<container>`` backend (the container client is the runner identity's)."""

    def __init__(self, container: object) -> None:
        from azure.storage.blob import ContainerClient

        assert isinstance(container, ContainerClient)
        self._container = container

    def locks(self, project: str, stack: str) -> list[StackLock]:
        found = []
        for prefix in lock_prefixes(project, stack):
            for blob in self._container.list_blobs(name_starts_with=prefix):
                if blob.name.endswith(".json") and "/" not in blob.name[len(prefix) :]:
                    lock = parse_lock(blob.name, self._container.download_blob(blob.name).readall())
                    found.extend([lock] if lock else [])
        return found

    def remove(self, lock: StackLock) -> None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            self._container.delete_blob(lock.name)
        except ResourceNotFoundError:  # gone meanwhile: what we wanted
            pass


class FileLockStore:
    """Locks in a ``file://<folder>`` backend (local development)."""

    def __init__(self, root: Path) -> None:
        self._root = root

    def locks(self, project: str, stack: str) -> list[StackLock]:
        found = []
        for prefix in lock_prefixes(project, stack):
            folder = self._root / prefix
            for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
                lock = parse_lock(str(path.relative_to(self._root)), path.read_bytes())
                found.extend([lock] if lock else [])
        return found

    def remove(self, lock: StackLock) -> None:
        (self._root / lock.name).unlink(missing_ok=True)


def lock_store_for(backend_url: str | None) -> LockStore | None:
    """The lock store of a self-managed backend; None for the service backend (it has ``pulumi cancel``)."""
    if not backend_url:
        return None
    parsed = urlparse(backend_url)
    if parsed.scheme == "file":
        return FileLockStore(Path(parsed.path or "/").expanduser())
    if parsed.scheme == "azblob":
        from azure.identity import DefaultAzureCredential
        from azure.storage.blob import ContainerClient

        account = os.environ.get("AZURE_STORAGE_ACCOUNT")
        if not account:
            return None  # the CLI could not reach this backend either; its own error says so
        url = f"https://{account}.blob.core.windows.net"
        return BlobLockStore(ContainerClient(url, parsed.netloc, credential=DefaultAzureCredential()))
    return None


def clear_stale_locks(
    store: LockStore,
    project: str,
    stack: str,
    owners: LockOwners,
    *,
    stale_seconds: float,
    now: datetime | None = None,
) -> list[str]:
    """Remove the stack's locks whose owner is proven dead (see the module docstring); the log lines."""
    moment = now or clock.utcnow()
    lines = []
    for lock in store.locks(project, stack):
        age = (moment - lock.locked_at).total_seconds()
        where = f"lock {lock.name} (taken on {lock.hostname or '?'} at {lock.locked_at.isoformat()}, {age:.0f} s ago)"
        state, detail = owners(lock.hostname, lock.locked_at)
        if age > stale_seconds and state == "dead":
            store.remove(lock)
            lines.append(f"stack {project}/{stack}: removed the stale {where}: its owner is dead ({detail})")
        else:
            why = "younger than the job staleness limit" if age <= stale_seconds else f"its owner is {state}"
            lines.append(f"stack {project}/{stack}: left the {where} in place: {why} ({detail})")
    for line in lines:
        logger.warning("%s", line)
    return lines
