"""The host's own settings sections (``RuntimeCloud:Host``, ``Auth``, ``Health``, ``Outbox``, ...).

Kept apart from :mod:`shared.wiring.settings`, which composes every section into the
host's settings and reads them: a service takes the sections it uses from here
(or from its module's ``settings``), and only the wiring and ``function_app.py``
import the settings root.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from shared.platform.modules import KNOWN_MODULES
from shared.platform.settings_section import NcrontabSchedule, Section


def _split_list(value: Any) -> Any:
    """Accept ``a, b, c`` as well as a JSON array for list settings."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


class Topology(str, Enum):
    SAAS_DEFAULT = "saas-default"
    HYBRID = "hybrid"
    ON_PREM = "on-prem"
    HYBRID_COMPUTE = "hybrid-compute"


class HostSettings(Section):
    enabled_modules: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(KNOWN_MODULES), alias="EnabledModules"
    )

    @field_validator("enabled_modules", mode="before")
    @classmethod
    def _parse_modules(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("enabled_modules")
    @classmethod
    def _known_modules(cls, modules: list[str]) -> list[str]:
        unknown = [name for name in modules if name not in KNOWN_MODULES]
        if unknown:
            raise ValueError(f"unknown module(s) {unknown}; known: {list(KNOWN_MODULES)}")
        return list(dict.fromkeys(modules))


class AuthSettings(Section):
    """Bearer token validation.

    In Azure set ``Authority`` (Entra ID, e.g. ``https://login.microsoftonline.com/{tenant}/v2.0``)
    or ``JwksUri``; locally ``LocalSigningKeyDirectory`` points at the folder where the
    development issuer keeps its key (``.data/auth``).
    """

    issuer: str = Field(default="runtime-cloud-local-issuer", alias="Issuer")
    audience: str = Field(default="api://runtime-cloud", alias="Audience")
    authority: str | None = Field(default=None, alias="Authority")
    jwks_uri: str | None = Field(default=None, alias="JwksUri")
    local_signing_key_directory: str | None = Field(default=None, alias="LocalSigningKeyDirectory")
    tenant_claim: str = Field(default="tid", alias="TenantClaim")
    clock_skew_seconds: int = Field(default=60, ge=0, le=600, alias="ClockSkewSeconds")
    # Longest accepted exp - iat: Entra ID access tokens live at most 24 h, so a longer one was not
    # issued for this API's callers (or a stolen signing key minted it to outlive any rotation).
    max_token_lifetime_seconds: int = Field(default=24 * 3600, ge=60, le=7 * 24 * 3600, alias="MaxTokenLifetimeSeconds")


class OutboxSettings(Section):
    """The outbox timers: resending events a crash left unsent, and purging dispatched rows."""

    # Events are sent right after their commit; this only recovers the ones a crash left behind.
    dispatch_schedule: NcrontabSchedule = Field(default="*/15 * * * * *", alias="DispatchSchedule")
    purge_schedule: NcrontabSchedule = Field(default="0 30 3 * * *", alias="PurgeSchedule")


class DurableSection(Section):
    """Durable Functions housekeeping (the task hub's own name is host.json's ``hubName``)."""

    # Finished instances (Completed, Failed, Terminated) created longer ago than this lose their
    # history. Keep it well above a day: the reconciler reads how a run's orchestration ended.
    history_retention_days: float = Field(default=30, ge=0, le=3650, alias="HistoryRetentionDays")
    purge_schedule: NcrontabSchedule = Field(default="0 0 5 * * *", alias="PurgeSchedule")


class ConfigPlatformSettings(Section):
    url: str | None = Field(default=None, alias="Url")


class HealthSettings(Section):
    probe_timeout_seconds: float = Field(default=3.0, gt=0, le=30, alias="ProbeTimeoutSeconds")
    # Concurrent health calls share one round of probes; a finished round answers calls for this long.
    cache_seconds: float = Field(default=1.0, ge=0, le=60, alias="CacheSeconds")


class MessagingSection(Section):
    service_name: str = Field(default="runtime-cloud", alias="ServiceName", min_length=1)
