"""The Pulumi runner's translation of engine events, tested with recorded engine events.

The files under ``engine_events/`` are event-log lines in the engine's JSON
format (one ``EngineEvent`` per line, as ``--event-log`` writes them and the
Automation API's ``on_event`` receives them), parsed with
``EngineEvent.from_json``: a preview of a stack with a create, an in-place
update, a delete and a replacement, and an update in which one step fails.
"""

from __future__ import annotations

import json
from pathlib import Path

from pulumi.automation.events import EngineEvent

from shared.iac.model import Action, FieldChange, StepStatus
from shared.iac.pulumi.events import apply_from_events, plan_from_events, property_at

RECORDED = Path(__file__).parent / "engine_events"
PREFIX = "urn:pulumi:prod::shop::azure-native:storage:"


def recorded(name: str) -> list[EngineEvent]:
    lines = (RECORDED / name).read_text(encoding="utf-8").splitlines()
    return [EngineEvent.from_json(json.loads(line)) for line in lines if line.strip()]


def test_recorded_preview_events_become_one_change_per_resource_without_stack_or_provider():
    plan = plan_from_events(recorded("preview.jsonl"), "pulumi", "3.200.0")

    assert [(change.name, change.action) for change in plan.changes] == [
        ("stshopprod", Action.REPLACE),
        ("orders", Action.CREATE),
        ("invoices", Action.UPDATE),
        ("legacy", Action.DELETE),
    ]
    assert plan.counts == {"create": 1, "update": 1, "delete": 1, "no-change": 0, "replace": 1}
    assert all(change.address.startswith(PREFIX) for change in plan.changes)
    assert plan.changes[0].type == "azure-native:storage:StorageAccount"


def test_recorded_preview_update_carries_field_level_before_and_after_from_the_detailed_diff():
    changes = {change.name: change for change in plan_from_events(recorded("preview.jsonl"), "pulumi", "v").changes}

    assert changes["invoices"].fields == [
        FieldChange(path="metadata.owner", before="billing", after="finance"),
        FieldChange(path="metadata.retention", before=None, after="7y"),
    ]
    assert "__defaults" not in (changes["invoices"].before or {})
    assert changes["stshopprod"].fields == [FieldChange(path="sku.name", before="Standard_LRS", after="Standard_ZRS")]


def test_recorded_preview_create_and_delete_list_every_input_field():
    changes = {change.name: change for change in plan_from_events(recorded("preview.jsonl"), "pulumi", "v").changes}

    create = changes["orders"]
    assert create.before is None and create.after["containerName"] == "orders"
    assert FieldChange(path="metadata.rc_environment", before=None, after="prod") in create.fields
    delete = changes["legacy"]
    assert delete.after is None
    assert FieldChange(path="queueName", before="legacy", after=None) in delete.fields


def test_recorded_preview_diagnostics_name_the_replacement_and_the_warning_without_colour_codes():
    plan = plan_from_events(recorded("preview.jsonl"), "pulumi", "v")

    assert any("stshopprod: replaced" in line and "['sku']" in line for line in plan.diagnostics)
    assert "warning: invoices: warning: metadata on containers is replaced as a whole" in plan.diagnostics
    assert not any("<{%" in line for line in plan.diagnostics)


def test_recorded_update_events_become_steps_with_outputs_timings_and_the_failure():
    result = apply_from_events(recorded("up-partly-failed.jsonl"), "pulumi", "3.200.0")

    steps = {step.address.removeprefix(PREFIX): step for step in result.steps}
    created = steps["BlobContainer::orders"]
    assert (created.action, created.status) == (Action.CREATE, StepStatus.APPLIED)
    assert created.outputs["id"].endswith("/containers/orders")
    assert created.started_at < created.finished_at
    failed = steps["BlobContainer::invoices"]
    assert (failed.action, failed.status) == (Action.UPDATE, StepStatus.FAILED)
    assert "being deleted" in failed.message and failed.outputs == {}
    assert (steps["Queue::legacy"].action, steps["Queue::legacy"].status) == (Action.DELETE, StepStatus.APPLIED)
    assert result.outputs["stack"] == {
        "ordersUrl": "https://stshopprod.blob.core.windows.net/orders",
        "connection": "[secret]",
    }
    assert any(line.startswith("engine summary:") for line in result.logs)


def test_property_paths_follow_the_engine_syntax():
    document = {"tags": {"a.b": "x", "env": "prod"}, "rules": [{"port": 443}]}

    assert property_at(document, "tags.env") == "prod"
    assert property_at(document, 'tags["a.b"]') == "x"
    assert property_at(document, "rules[0].port") == 443
    assert property_at(document, "rules[3].port") is None
    assert property_at(None, "tags.env") is None
