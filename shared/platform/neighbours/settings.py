"""``RuntimeCloud:ControlPlane:*``, ``RuntimeCloud:KnowledgeHost:*``, ``RuntimeCloud:DeliveryHost:*``.

Every neighbour's section has the same fields (the README's "Dependencies
(neighbours)" table lists them):

- ``BaseUrl``: empty: the neighbour is **not configured** (no client is made,
  health says so). Otherwise an ``https://`` URL, or ``http://`` to a loopback
  host only (a local stand-in): the host's token is never sent in clear text.
- ``Scope``: empty: the Entra ID scope (e.g. ``api://control-plane/.default``)
  of the bearer token every request carries, from the host's one credential
  (:mod:`shared.platform.credentials`); empty: no ``Authorization`` header.
- ``TimeoutSeconds``: ``5``: one request (connect and read each).
- ``Retries``: ``2``: further attempts after a refused connection or a 429,
  502, 503 or 504, with jittered back-off; never after a time-out (a slow
  neighbour stays slow) nor for a 500.

ControlPlaneApi also has ``CacheSeconds`` (``30``): how long an environment's
registration, or an edition's quotas, are used before ControlPlaneApi is asked
again. Only answers are cached (never a "not registered"), and nothing is used
past its time when ControlPlaneApi does not answer.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator

from shared.platform.settings_section import NcrontabSchedule, Section

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class NeighbourSettings(Section):
    """What every neighbour's section holds; :attr:`configured` when it has a base URL."""

    base_url: str = Field(default="", alias="BaseUrl")
    scope: str = Field(default="", max_length=500, alias="Scope")
    timeout_seconds: float = Field(default=5, gt=0, le=60, alias="TimeoutSeconds")
    retries: int = Field(default=2, ge=0, le=5, alias="Retries")

    @field_validator("base_url")
    @classmethod
    def _acceptable_base_url(cls, url: str) -> str:
        url = url.strip()
        if url and not acceptable_url(url):
            raise ValueError("an https:// URL (http:// only on a loopback host), without credentials or query")
        return url

    @property
    def configured(self) -> bool:
        return bool(self.base_url)


class ControlPlaneSettings(NeighbourSettings):
    """``RuntimeCloud:ControlPlane``: ControlPlaneApi (environments, editions' quotas)."""

    cache_seconds: float = Field(default=30, ge=0, le=3600, alias="CacheSeconds")


class KnowledgeHostSettings(NeighbourSettings):
    """``RuntimeCloud:KnowledgeHost``: KnowledgeHost (receipts, run outputs and drift reports as artifacts).

    Artifacts go through an outbox (:mod:`shared.platform.events.artifact_outbox`) that the ``artifact_publisher``
    timer sends on ``PublishSchedule``; an artifact is dead-lettered after ``PublishAttempts`` failed
    attempts, the first retried after ``PublishBackoffSeconds``, doubling each time (at most an hour)."""

    publish_schedule: NcrontabSchedule = Field(default="*/10 * * * * *", alias="PublishSchedule")
    publish_attempts: int = Field(default=10, ge=1, le=100, alias="PublishAttempts")
    publish_backoff_seconds: float = Field(default=30, ge=0, le=3600, alias="PublishBackoffSeconds")


class DeliveryHostSettings(NeighbourSettings):
    """``RuntimeCloud:DeliveryHost``: DeliveryHost (release resolution)."""


def acceptable_url(url: str) -> bool:
    """https, or plain http to this machine only; no user, password, query or fragment in it."""
    parts = urlsplit(url)
    if parts.username or parts.password or parts.query or parts.fragment or not parts.hostname:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS)
