"""Health calls that arrive together share one round of probes (docs/settings.md: ``CacheSeconds``)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, cast

import pytest

import shared.health as health
from shared.health.sections import HealthSections


def settings_with(cache_seconds: float) -> HealthSections:
    return cast(HealthSections, SimpleNamespace(health=SimpleNamespace(cache_seconds=cache_seconds)))


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    state: dict[str, Any] = {"rounds": 0, "gate": threading.Event()}

    def probe_all(sections: HealthSections) -> health.HealthReport:
        state["rounds"] += 1
        assert state["gate"].wait(10)
        return health.HealthReport("runtime-cloud", "0", health.HEALTHY, True, checked_at=str(state["rounds"]))

    monkeypatch.setattr(health, "_probe_all", probe_all)
    monkeypatch.setattr(health, "_round", None)
    return state


def test_calls_that_arrive_during_a_round_share_it(probes: dict[str, Any]) -> None:
    settings = settings_with(0)
    with ThreadPoolExecutor(20) as pool:
        answers = [pool.submit(health.check_health, settings) for _ in range(20)]
        while probes["rounds"] == 0:
            threading.Event().wait(0.01)
        threading.Event().wait(0.2)  # let the other callers join the running round
        probes["gate"].set()
        reports = [answer.result() for answer in answers]
    assert probes["rounds"] == 1
    assert {report.checked_at for report in reports} == {"1"}


def test_without_a_cache_a_call_after_a_finished_round_probes_again(probes: dict[str, Any]) -> None:
    probes["gate"].set()
    settings = settings_with(0)
    health.check_health(settings)
    health.check_health(settings)
    assert probes["rounds"] == 2


def test_a_finished_round_answers_for_the_cache_time(probes: dict[str, Any]) -> None:
    probes["gate"].set()
    settings = settings_with(60)
    first, second = health.check_health(settings), health.check_health(settings)
    assert probes["rounds"] == 1 and first.checked_at == second.checked_at
    assert first is not second  # each caller gets its own report object


def test_a_failed_round_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def failing(sections: HealthSections) -> health.HealthReport:
        calls.append(1)
        raise RuntimeError("probe broke")

    monkeypatch.setattr(health, "_probe_all", failing)
    monkeypatch.setattr(health, "_round", None)
    settings = settings_with(60)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            health.check_health(settings)
    assert len(calls) == 2
