"""The Pulumi refresh-preview observer's reading of engine events.

The Pulumi CLI cannot be installed on these machines, so the observer's
CLI-driving half is not exercised here; its event reading is, with engine
events in the CLI's JSON event format written for this test
(``refresh_preview_events.jsonl``: one resource drifted, one deleted
outside Pulumi, one whose computed outputs moved on their own).
"""

from __future__ import annotations

import json
from pathlib import Path

from pulumi.automation.events import EngineEvent

from shared.inventory.comparison import compare
from shared.inventory.model import FindingKind
from shared.inventory.observers.pulumi_refresh import PulumiRefreshObserver, observation_from_refresh

EVENTS = Path(__file__).parent / "refresh_preview_events.jsonl"


def events() -> list[EngineEvent]:
    return [EngineEvent.from_json(json.loads(line)) for line in EVENTS.read_text().splitlines() if line.strip()]


def test_a_refresh_preview_reads_as_missing_and_field_level_changed_drift_only():
    observation = observation_from_refresh(events(), "azure-prod", observed_at="2026-01-01T00:00:00+00:00")

    assert observation.expected is not None and len(observation.expected) == 3  # the stack itself is not infrastructure
    drift = compare(observation.expected, observation)

    assert [(d.kind, d.name) for d in drift] == [(FindingKind.CHANGED, "orders"), (FindingKind.MISSING, "cache")]
    changed = drift[0]
    assert [(f.path, f.before, f.after) for f in changed.fields] == [("tags.owner", "team-shop", "ops-oncall")]
    assert changed.key.startswith("/subscriptions/") and changed.key == changed.key.lower()


def test_without_the_cli_the_refresh_observer_fails_instead_of_reporting_nothing(monkeypatch):
    import pytest

    from shared.inventory.observers.base import ObservationFailed

    monkeypatch.setattr("shutil.which", lambda name: None)
    observer = PulumiRefreshObserver(backend_url=None, work_root=None)
    with pytest.raises(ObservationFailed, match="Pulumi CLI is not installed"):
        observer.observe(None)  # type: ignore[arg-type]
