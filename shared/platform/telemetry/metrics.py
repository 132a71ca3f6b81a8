"""The host's metrics: counters, histograms and observable gauges under the names of :mod:`names`.

Dimensions are the metric's declared ones only (others are dropped) and their
values are cut to 64 characters, so a series count stays bounded. Gauges are
observed when the exporter collects (Azure Monitor: every minute; locally:
every ``RuntimeCloud:Telemetry:MetricIntervalSeconds``); a gauge whose source
fails reports nothing for that round instead of raising.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from shared.platform.telemetry.names import MetricName

METER_NAME = "runtime_cloud"
MAX_DIMENSION_LENGTH = 64
log = logging.getLogger("runtime_cloud.telemetry")

Reading = tuple[float, dict[str, str]]
GaugeSource = Callable[[], Iterable[Reading]]

_lock = threading.Lock()
_instruments: dict[str, Any] = {}
_gauges: dict[str, list[GaugeSource]] = {}


def _dimensions(metric: MetricName, given: dict[str, Any]) -> dict[str, str]:
    return {name: str(given[name])[:MAX_DIMENSION_LENGTH] for name in metric.dimensions if given.get(name) is not None}


def _instrument(metric: MetricName) -> Any:
    with _lock:
        instrument = _instruments.get(metric.name)
        if instrument is None:
            meter = metrics.get_meter(METER_NAME)
            if metric.instrument == "counter":
                instrument = meter.create_counter(metric.name, unit=metric.unit, description=metric.summary)
            elif metric.instrument == "histogram":
                instrument = meter.create_histogram(metric.name, unit=metric.unit, description=metric.summary)
            else:
                raise ValueError(f"{metric.name} is a {metric.instrument}: observe it with observe()")
            _instruments[metric.name] = instrument
        return instrument


def count(metric: MetricName, amount: int = 1, **dimensions: Any) -> None:
    _instrument(metric).add(amount, _dimensions(metric, dimensions))


def record(metric: MetricName, value: float, **dimensions: Any) -> None:
    _instrument(metric).record(value, _dimensions(metric, dimensions))


def observe(metric: MetricName, source: GaugeSource) -> None:
    """Report ``source()``'s readings as gauge ``metric`` at every collection (one gauge, any number of sources)."""
    if metric.instrument != "gauge":
        raise ValueError(f"{metric.name} is a {metric.instrument}, not a gauge")
    with _lock:
        sources = _gauges.get(metric.name)
        if sources is not None:
            sources.append(source)
            return
        _gauges[metric.name] = sources = [source]

    def callback(_options: CallbackOptions) -> Iterable[Observation]:
        observations: list[Observation] = []
        for each in list(sources):
            try:
                observations.extend(Observation(value, _dimensions(metric, dims)) for value, dims in each())
            except Exception as error:  # noqa: BLE001 - a gauge whose source fails skips this round
                log.warning("gauge %s: %s: %s", metric.name, type(error).__name__, str(error).splitlines()[:1])
        return observations

    metrics.get_meter(METER_NAME).create_observable_gauge(
        metric.name, callbacks=[callback], unit=metric.unit, description=metric.summary
    )


def forget_gauges() -> None:
    """Drop the registered gauge sources (tests)."""
    with _lock:
        for sources in _gauges.values():
            sources.clear()
