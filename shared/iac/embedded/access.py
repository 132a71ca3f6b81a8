"""Reaching a target storage account: clients, time-outs, and what a failure means.

The storage SDKs retry for minutes by default (exponential back-off from 15 s).
A provisioning run or a drift scan must learn in seconds that a target does not
answer, so every client made here has a short per-attempt time-out and at most
``retries`` quick retries. Failures that mean "the target could not be used"
(no connection, time-out, 5xx, a refused or missing credential) become
:class:`~shared.iac.model.TargetUnreachable`; the inventory marks its
observation stale on it instead of reading "everything is gone".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType

from azure.core.exceptions import (
    ClientAuthenticationError,
    HttpResponseError,
    ServiceRequestError,
    ServiceResponseError,
)
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.blob import LinearRetry as BlobRetry
from azure.storage.queue import LinearRetry as QueueRetry
from azure.storage.queue import QueueServiceClient

from shared.iac.model import TargetUnreachable
from shared.platform.errors import InvalidSettings
from shared.platform.target_access import target_blob_service, target_queue_service, target_table_service
from shared.platform.targets import ProvisioningTarget


@dataclass(frozen=True)
class AccessPolicy:
    """How hard to try a target before calling it unreachable.

    Defaults: ``timeout_seconds`` 5 (connect and read, per attempt), ``retries`` 1,
    ``backoff_seconds`` 0.5. A refused connection fails in about a second; a
    target that swallows packets in about ``(retries + 1) * timeout_seconds``.
    """

    timeout_seconds: float = 5.0
    retries: int = 1
    backoff_seconds: float = 0.5

    def storage_options(self, retry_class: type[BlobRetry] | type[QueueRetry]) -> dict[str, object]:
        return {
            "retry_policy": retry_class(
                backoff=self.backoff_seconds,  # type: ignore[arg-type]
                retry_total=self.retries,
                random_jitter_range=self.backoff_seconds / 2,  # type: ignore[arg-type]
            ),
            "connection_timeout": self.timeout_seconds,
            "read_timeout": self.timeout_seconds,
        }

    def table_options(self) -> dict[str, object]:
        return {
            "retry_total": self.retries,
            "retry_backoff_factor": self.backoff_seconds,
            "retry_backoff_max": max(self.backoff_seconds, 1.0),
            "connection_timeout": self.timeout_seconds,
            "read_timeout": self.timeout_seconds,
        }


class TargetClients:
    """The blob, queue and table service clients of one target account (a context manager)."""

    def __init__(
        self,
        target: ProvisioningTarget,
        blobs: BlobServiceClient,
        queues: QueueServiceClient,
        tables: TableServiceClient,
    ) -> None:
        self.target = target
        self.blobs = blobs
        self.queues = queues
        self.tables = tables

    @property
    def account_name(self) -> str:
        return self.blobs.account_name or ""

    def container_url(self, name: str) -> str:
        return f"{self.blobs.url.rstrip('/')}/{name}"

    def queue_url(self, name: str) -> str:
        return f"{self.queues.url.rstrip('/')}/{name}"

    def table_url(self, name: str) -> str:
        return f"{self.tables.url.rstrip('/')}/{name}"

    def close(self) -> None:
        for client in (self.blobs, self.queues, self.tables):
            client.close()

    def __enter__(self) -> TargetClients:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def open_target(target: ProvisioningTarget, policy: AccessPolicy | None = None) -> TargetClients:
    """Clients for a target's account; the credential reference is resolved now (rotation needs no restart)."""
    policy = policy or AccessPolicy()
    with unreachable_on_failure(target, "resolving its credential"):
        return TargetClients(
            target,
            blobs=target_blob_service(target, **policy.storage_options(BlobRetry)),
            queues=target_queue_service(target, **policy.storage_options(QueueRetry)),
            tables=target_table_service(target, **policy.table_options()),
        )


def is_unreachable(error: BaseException) -> bool:
    """Whether an SDK error means the target could not be used (as opposed to a refused request)."""
    if isinstance(error, (ServiceRequestError, ServiceResponseError, ClientAuthenticationError, InvalidSettings)):
        return True
    if isinstance(error, HttpResponseError):
        status = error.status_code or 0
        return status >= 500 or status in (401, 403, 408)
    return False


@contextmanager
def unreachable_on_failure(target: ProvisioningTarget, doing: str) -> Iterator[None]:
    """Turn the SDK's "could not use the target" errors into :class:`TargetUnreachable`."""
    try:
        yield
    except TargetUnreachable:
        raise
    except Exception as error:  # classified below, re-raised otherwise
        if not is_unreachable(error):
            raise
        raise TargetUnreachable(describe_unreachable(target, doing, error)) from error


def describe_unreachable(target: ProvisioningTarget, doing: str, error: BaseException) -> str:
    if isinstance(error, InvalidSettings):
        return f"target {target.id}: {error}"
    status = getattr(error, "status_code", None)
    if isinstance(error, ClientAuthenticationError) or status in (401, 403):
        return f"target {target.id} refused the credential while {doing} (HTTP {status})"
    first_line = (str(error).splitlines() or [""])[0][:300]
    answer = f"HTTP {status}" if status else type(error).__name__
    return f"target {target.id} did not answer while {doing} ({answer}: {first_line})"
