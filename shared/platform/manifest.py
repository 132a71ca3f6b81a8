"""A feature's manifest: what the app registers for it, declared once beside the feature's composition.

Each feature's composition module (``shared/wiring/<feature>.py``) declares one
:class:`FeatureManifest`; :mod:`shared.wiring.features` lists them. The app
registers the triggers of the enabled ones (``functions.blueprints_for``) and
their problem mappings, health reads the lag of their inbound queues, and
telemetry observes their gauges, so adding a feature (or a queue, or a gauge) is one edit in one place.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from shared.platform.http.problems import ProblemMapping
from shared.platform.telemetry.metrics import GaugeSource
from shared.platform.telemetry.names import MetricName


@dataclass(frozen=True)
class FeatureManifest:
    name: str
    # The deployable module (``Host:EnabledModules``) the feature ships with; None: the host's own, always on.
    module: str | None
    # Modules under functions/ and orchestrations/ whose ``bp`` the app registers (imported by name).
    triggers: tuple[str, ...]
    # Other modules that must be enabled too (pool autoscaling drives capacity's pools through provisioning runs).
    also_needs: frozenset[str] = frozenset()
    # Where callers leave the feature work: health and ``host.inbox_lag`` report each one's lag, by module.
    inbound_queues: tuple[str, ...] = ()
    # Read when the exporter collects (every minute in Azure), each one bounded query.
    gauges: Mapping[MetricName, GaugeSource] = field(default_factory=dict)
    # The feature's own refusals as problem documents: the app registers them with the request pipeline,
    # which answers them so on every endpoint (shared.platform.http.problems.register_problems).
    problems: ProblemMapping | None = None

    def enabled(self, modules: Collection[str]) -> bool:
        return (self.module is None or self.module in modules) and self.also_needs <= set(modules)
