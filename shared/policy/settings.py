"""``RuntimeCloud:Policy:*``: where the policy gate reads its bundles, and the bounds of exceptions.

Defaults (the README's Settings table lists the same):

- ``Source``: ``files`` (the gate is **on** by default, reading the shipped ``policies/`` tree);
  ``http`` (GovernanceHost); ``none`` is an explicit opt-out: plans are not checked, receipts
  say ``"source": "none"``, the host logs a warning at start and health shows the gate off
- ``Directory``: ``policies``: the bundle tree for ``files`` (absolute, or relative to the app's
  folder, which is the deployment package's root in Azure)
- ``GovernanceHostUrl``: the bundle tree's base URL for ``http`` (GovernanceHost)
- ``GovernanceHostScope``: empty: the Entra ID scope (e.g. ``api://governance-host/.default``)
  of the bearer token each GovernanceHost request carries, from the host's one credential;
  empty: no ``Authorization`` header (a local stand-in, or a tree served anonymously)
- ``CacheSeconds``: ``60``: how long a fetched bundle layer is used before it is asked for again
- ``TimeoutSeconds``: ``5``: one request to GovernanceHost
- ``MaxBundleBytes``: ``1048576``: one layer, as read
- ``MaxExceptionDays``: ``90``: an exception expires at most this far ahead
- ``ExceptionRetentionDays``: ``396``: an exception's row is purged this long after it ended
  (expired or revoked); the plan receipts that relied on it keep their copy
- ``PurgeSchedule``: ``0 45 4 * * *`` (daily at 04:45 UTC): when the ``policy_purge`` timer runs
"""

from __future__ import annotations

from enum import Enum
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from shared.platform.settings_section import NcrontabSchedule, Section

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
DEFAULT_DIRECTORY = "policies"  # the shipped tree (tools/package.py puts it in the package)
DEFAULT_PURGE_SCHEDULE = "0 45 4 * * *"


class PolicySource(str, Enum):
    NONE = "none"
    FILES = "files"
    HTTP = "http"


class PolicySettings(Section):
    source: PolicySource = Field(default=PolicySource.FILES, alias="Source")
    directory: str = Field(default=DEFAULT_DIRECTORY, alias="Directory")
    governance_host_url: str = Field(default="", alias="GovernanceHostUrl")
    governance_host_scope: str = Field(default="", max_length=500, alias="GovernanceHostScope")
    cache_seconds: float = Field(default=60, ge=0, le=3600, alias="CacheSeconds")
    timeout_seconds: float = Field(default=5, gt=0, le=60, alias="TimeoutSeconds")
    max_bundle_bytes: int = Field(default=1024 * 1024, ge=1024, le=4 * 1024 * 1024, alias="MaxBundleBytes")
    max_exception_days: int = Field(default=90, ge=1, le=365, alias="MaxExceptionDays")
    exception_retention_days: int = Field(default=396, ge=1, le=3650, alias="ExceptionRetentionDays")
    purge_schedule: NcrontabSchedule = Field(default=DEFAULT_PURGE_SCHEDULE, alias="PurgeSchedule")

    @model_validator(mode="after")
    def _source_is_complete(self) -> PolicySettings:
        if self.source is PolicySource.FILES and not self.directory:
            raise ValueError("Source files needs Directory (the folder holding installation.yaml)")
        if self.source is PolicySource.HTTP and not _acceptable_url(self.governance_host_url):
            raise ValueError("Source http needs GovernanceHostUrl: an https:// URL (http:// only on a loopback host)")
        return self


def _acceptable_url(url: str) -> bool:
    """https, or plain http to this machine only (a local GovernanceHost): policy is never read in clear text."""
    parts = urlsplit(url)
    if parts.username or parts.password or parts.query or parts.fragment or not parts.hostname:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS)
