"""From Pulumi engine events to the runner contract's plan and apply results.

Pure: it takes :class:`pulumi.automation.events.EngineEvent` values (as the
Automation API's ``on_event`` delivers them, or as parsed from an event log /
``--event-log`` line with ``EngineEvent.from_json``) and returns
:class:`~shared.iac.model.PlanResult` / :class:`~shared.iac.model.ApplyResult`.
Keeping it apart from the CLI-driving code lets it be tested with recorded
engine events where the CLI cannot be installed.

Choices, and why:

- One change per URN. A replacement arrives as up to three steps
  (``create-replacement``, ``replace``, ``delete-replaced``); a reviewer must
  see one resource being *replaced*, so they fold into one ``replace``.
- The stack resource and provider resources are not infrastructure a
  reviewer approves; they are left out of the changes.
- ``before`` / ``after`` are the old and new *inputs* (what the program
  declares); the engine already hides secret inputs as ``[secret]``. Keys the
  engine uses for itself (``__defaults``, ``__meta``...) are dropped.
- Field paths are the engine's own property paths (``tags.env``,
  ``rules[0].port``, ``tags["a.b"]``), taken from ``detailedDiff`` when the
  provider gives one, else from ``diffs`` (top-level keys).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from shared.iac.embedded.state import field_changes
from shared.iac.model import Action, ApplyResult, FieldChange, PlanResult, ResourceChange, StepResult, StepStatus

if TYPE_CHECKING:  # at run time pulumi is imported where events are read (see _op_actions)
    from pulumi.automation.events import EngineEvent, OpType, StepEventMetadata

STACK_TYPE = "pulumi:pulumi:Stack"
PROVIDER_TYPE_PREFIX = "pulumi:providers:"

# When several steps touch one URN, the most consequential names the change.
PRECEDENCE = [Action.NO_CHANGE, Action.UPDATE, Action.CREATE, Action.DELETE, Action.REPLACE]

_COLOR_DIRECTIVE = re.compile(r"<\{%[^%]*%\}>")
_PATH_TOKEN = re.compile(r'\.?([^.\[\]"]+)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')


@cache
def _op_actions() -> dict[OpType, Action]:
    """The change each engine step makes."""
    # Imported on first use: pulumi.automation loads all of pulumi (~0.14 s of CPU), which every host start and
    # runner job would pay for this module's helpers (shared.iac.api) though only a Pulumi run reads events.
    from pulumi.automation.events import OpType

    return {
        OpType.SAME: Action.NO_CHANGE,
        OpType.READ: Action.NO_CHANGE,
        OpType.REFRESH: Action.NO_CHANGE,
        OpType.IMPORT: Action.NO_CHANGE,  # adopted into the stack's state; nothing changes in the cloud
        OpType.CREATE: Action.CREATE,
        OpType.UPDATE: Action.UPDATE,
        OpType.DELETE: Action.DELETE,
        OpType.REPLACE: Action.REPLACE,
        OpType.CREATE_REPLACEMENT: Action.REPLACE,
        OpType.DELETE_REPLACED: Action.REPLACE,
        OpType.READ_REPLACEMENT: Action.REPLACE,
        OpType.IMPORT_REPLACEMENT: Action.REPLACE,
    }


def is_infrastructure(resource_type: str) -> bool:
    return resource_type != STACK_TYPE and not resource_type.startswith(PROVIDER_TYPE_PREFIX)


def resource_name(urn: str) -> str:
    """``urn:pulumi:dev::shop::azure-native:storage:BlobContainer::orders`` -> ``orders``."""
    return urn.rsplit("::", 1)[-1]


def clean(document: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Inputs or outputs without the engine's own ``__`` keys (None stays None)."""
    if document is None:
        return None
    return {key: value for key, value in document.items() if not key.startswith("__")}


def plain_message(text: str) -> str:
    """A diagnostic without the CLI's colour directives and trailing white space."""
    return _COLOR_DIRECTIVE.sub("", text).strip()


def property_at(document: Mapping[str, Any] | None, path: str) -> Any:
    """The value at an engine property path, or None when any part is absent."""
    value: Any = document
    for match in _PATH_TOKEN.finditer(path):
        name, index, quoted = match.groups()
        if value is None:
            return None
        if index is not None:
            position = int(index)
            value = value[position] if isinstance(value, list) and position < len(value) else None
        else:
            key = name if name is not None else re.sub(r"\\(.)", r"\1", quoted)
            value = value.get(key) if isinstance(value, Mapping) else None
    return value


def timestamp(seconds: int | float | None) -> str:
    return datetime.fromtimestamp(seconds or 0, UTC).isoformat()


@dataclass
class _Resource:
    """Everything the events said about one URN."""

    urn: str
    type: str
    action: Action = Action.NO_CHANGE
    old: StepEventMetadata | None = None
    new: StepEventMetadata | None = None
    metadata: list[StepEventMetadata] = field(default_factory=list)
    started: int | None = None
    finished: int | None = None
    outputs: dict[str, Any] | None = None
    failed: bool = False

    def take(self, metadata: StepEventMetadata) -> None:
        self.metadata.append(metadata)
        action = _op_actions().get(metadata.op, Action.NO_CHANGE)
        if PRECEDENCE.index(action) > PRECEDENCE.index(self.action):
            self.action = action
        if metadata.old is not None and self.old is None:
            self.old = metadata  # the first step that knew the old state
        if metadata.new is not None:
            self.new = metadata  # the last step that knows the new state

    def before(self) -> dict[str, Any] | None:
        if self.action is Action.CREATE or self.old is None or self.old.old is None:
            return None
        return clean(self.old.old.inputs)

    def after(self) -> dict[str, Any] | None:
        if self.action is Action.DELETE or self.new is None or self.new.new is None:
            return None
        return clean(self.new.new.inputs)


def _fields(resource: _Resource) -> list[FieldChange]:
    from pulumi.automation.events import DiffKind  # imported on first use, as in _op_actions

    before, after = resource.before(), resource.after()
    detailed: dict[str, Any] = {}
    diffs: list[str] = []
    for metadata in resource.metadata:
        detailed.update(metadata.detailed_diff or {})
        diffs.extend(key for key in (metadata.diffs or []) if key not in diffs)
    if detailed:
        old_outputs = clean(resource.old.old.outputs) if resource.old and resource.old.old else None
        changes = []
        for path, difference in sorted(detailed.items()):
            basis = before if difference.input_diff or old_outputs is None else old_outputs
            added = difference.diff_kind in (DiffKind.ADD, DiffKind.ADD_REPLACE)
            deleted = difference.diff_kind in (DiffKind.DELETE, DiffKind.DELETE_REPLACE)
            changes.append(
                FieldChange(
                    path=path,
                    before=None if added else property_at(basis, path),
                    after=None if deleted else property_at(after, path),
                )
            )
        return changes
    if diffs:
        return [
            FieldChange(path=key, before=(before or {}).get(key), after=(after or {}).get(key))
            for key in sorted(diffs)
            if not key.startswith("__")
        ]
    if resource.action in (Action.CREATE, Action.DELETE, Action.REPLACE):
        return field_changes(before, after)
    return []


class _Reader:
    """Folds a stream of engine events into per-URN records, diagnostics and a summary."""

    def __init__(self, events: Iterable[EngineEvent]) -> None:
        self.resources: dict[str, _Resource] = {}
        self.diagnostics: list[str] = []
        self.errors_by_urn: dict[str, list[str]] = {}
        self.logs: list[str] = []
        self.stack_outputs: dict[str, Any] = {}
        for event in sorted(events, key=lambda item: item.sequence):
            self._read(event)

    def _resource(self, metadata: StepEventMetadata) -> _Resource:
        found = self.resources.get(metadata.urn)
        if found is None:
            found = self.resources[metadata.urn] = _Resource(urn=metadata.urn, type=metadata.type)
        return found

    def _read(self, event: EngineEvent) -> None:
        if event.resource_pre_event is not None:
            resource = self._resource(event.resource_pre_event.metadata)
            resource.take(event.resource_pre_event.metadata)
            resource.started = resource.started or event.timestamp
            keys = event.resource_pre_event.metadata.keys
            if resource.action is Action.REPLACE and keys:
                note = f"{resource.urn}: replaced (destroyed and created again) because of {sorted(keys)}"
                if note not in self.diagnostics:
                    self.diagnostics.append(note)
        elif event.res_outputs_event is not None:
            metadata = event.res_outputs_event.metadata
            resource = self._resource(metadata)
            resource.take(metadata)
            resource.finished = event.timestamp
            if metadata.new is not None and metadata.new.outputs is not None:
                resource.outputs = clean(metadata.new.outputs)
                if metadata.type == STACK_TYPE:
                    self.stack_outputs = dict(resource.outputs or {})
        elif event.res_op_failed_event is not None:
            resource = self._resource(event.res_op_failed_event.metadata)
            resource.take(event.res_op_failed_event.metadata)
            resource.failed, resource.finished = True, event.timestamp
        elif event.diagnostic_event is not None:
            self._diagnostic(event)
        elif event.policy_event is not None:
            policy = event.policy_event
            self.diagnostics.append(
                f"policy {policy.policy_pack_name}/{policy.policy_name} "
                f"({policy.enforcement_level}): {plain_message(policy.message)}"
            )
        elif event.summary_event is not None:
            summary = event.summary_event
            self.logs.append(f"engine summary: {dict(summary.resource_changes)} in {summary.duration_seconds} s")
            if summary.maybe_corrupt:
                self.diagnostics.append("the engine reports the stack may be corrupt (maybeCorrupt)")

    def _diagnostic(self, event: EngineEvent) -> None:
        diagnostic = event.diagnostic_event
        assert diagnostic is not None
        message = plain_message(diagnostic.message)
        if not message or diagnostic.severity == "debug":
            return
        where = f"{resource_name(diagnostic.urn)}: " if diagnostic.urn else ""
        line = f"{diagnostic.severity}: {where}{message}"
        self.logs.append(line)
        if diagnostic.severity in ("warning", "error"):
            self.diagnostics.append(line)
        if diagnostic.severity == "error" and diagnostic.urn:
            self.errors_by_urn.setdefault(diagnostic.urn, []).append(message)

    def infrastructure(self) -> list[_Resource]:
        return [resource for resource in self.resources.values() if is_infrastructure(resource.type)]


def plan_from_events(events: Iterable[EngineEvent], runner: str, runner_version: str) -> PlanResult:
    """A preview's events as a plan: one change per resource URN, in the engine's order."""
    reader = _Reader(events)
    changes = [
        ResourceChange(
            address=resource.urn,
            type=resource.type,
            name=resource_name(resource.urn),
            action=resource.action,
            before=resource.before(),
            after=resource.after(),
            fields=_fields(resource),
        )
        for resource in reader.infrastructure()
    ]
    return PlanResult(runner=runner, runner_version=runner_version, changes=changes, diagnostics=reader.diagnostics)


def apply_from_events(events: Iterable[EngineEvent], runner: str, runner_version: str) -> ApplyResult:
    """An update's events as apply results: one step per resource the engine finished or failed."""
    reader = _Reader(events)
    steps: list[StepResult] = []
    outputs: dict[str, Any] = {}
    for resource in reader.infrastructure():
        if resource.finished is None:
            continue  # announced but never finished: the update stopped before it
        if resource.failed:
            status, message = StepStatus.FAILED, "; ".join(reader.errors_by_urn.get(resource.urn, [])) or "failed"
        elif resource.action is Action.NO_CHANGE:
            status, message = StepStatus.UNCHANGED, "unchanged"
        else:
            status, message = StepStatus.APPLIED, resource.action.value
        step_outputs = (resource.outputs or {}) if status is not StepStatus.FAILED else {}
        steps.append(
            StepResult(
                address=resource.urn,
                action=resource.action,
                status=status,
                started_at=timestamp(resource.started or resource.finished),
                finished_at=timestamp(resource.finished),
                outputs=step_outputs,
                message=message,
            )
        )
        if step_outputs:
            outputs[resource.urn] = step_outputs
    if reader.stack_outputs:
        outputs["stack"] = reader.stack_outputs
    return ApplyResult(runner=runner, runner_version=runner_version, steps=steps, outputs=outputs, logs=reader.logs)
