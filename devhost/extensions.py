"""The extensions a started host loads (trigger kinds beyond HTTP, queue and timer)."""

from __future__ import annotations

from devhost.durable import DurableExtension
from devhost.host import HostExtension
from devhost.runner_jobs import RunnerJobScaler


def default_extensions() -> list[HostExtension]:
    return [DurableExtension(), RunnerJobScaler()]
