"""What health needs to show one neighbour: its name, whether it is configured, whether a run waits on it.

The wiring makes one per neighbour (:mod:`shared.wiring.neighbours`); health
(:mod:`shared.health.neighbours`) asks :attr:`http` whether it answers, with
its own probe time-out and no retries.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.platform.neighbours.http_client import NeighbourHttp


@dataclass(frozen=True)
class NeighbourProbe:
    check: str  # the health check's name: "control-plane", "knowledge-host", "delivery-host"
    service: str  # "ControlPlaneApi", "KnowledgeHost", "DeliveryHost"
    setting: str  # the setting that configures it, as an operator writes it
    http: NeighbourHttp | None  # None: not configured
    # Fail-fast: a run that needs it fails (with a receipt) while it is down; degrading: work waits or
    # goes on without it. Either way health is degraded while a configured neighbour does not answer.
    fail_fast: bool
    when_down: str  # what happens while it is configured but does not answer
    when_unconfigured: str  # what the host does without it

    @property
    def configured(self) -> bool:
        return self.http is not None
