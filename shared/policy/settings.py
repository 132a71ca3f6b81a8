"""``RuntimeCloud:Policy:*``: where the policy gate reads its bundles, and the bounds of exceptions.

Defaults (the README's Settings table lists the same):

- ``Source``: ``none`` (no gate: plans are not checked and receipts say so), ``files`` or ``http``
- ``Directory``: the bundle tree for ``files`` (absolute, or relative to the app's folder)
- ``GovernanceHostUrl``: the bundle tree's base URL for ``http`` (GovernanceHost)
- ``CacheSeconds``: ``60``: how long a fetched bundle layer is used before it is asked for again
- ``TimeoutSeconds``: ``5``: one request to GovernanceHost
- ``MaxBundleBytes``: ``1048576``: one layer, as read
- ``MaxExceptionDays``: ``90``: an exception expires at most this far ahead
"""

from __future__ import annotations

from enum import Enum
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from shared.settings_section import Section

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class PolicySource(str, Enum):
    NONE = "none"
    FILES = "files"
    HTTP = "http"


class PolicySettings(Section):
    source: PolicySource = Field(default=PolicySource.NONE, alias="Source")
    directory: str = Field(default="", alias="Directory")
    governance_host_url: str = Field(default="", alias="GovernanceHostUrl")
    cache_seconds: float = Field(default=60, ge=0, le=3600, alias="CacheSeconds")
    timeout_seconds: float = Field(default=5, gt=0, le=60, alias="TimeoutSeconds")
    max_bundle_bytes: int = Field(default=1024 * 1024, ge=1024, le=4 * 1024 * 1024, alias="MaxBundleBytes")
    max_exception_days: int = Field(default=90, ge=1, le=365, alias="MaxExceptionDays")

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
