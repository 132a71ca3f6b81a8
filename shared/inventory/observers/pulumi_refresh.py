"""Observing a Pulumi stack with a refresh preview (Automation API, needs the Pulumi CLI).

``pulumi preview --refresh``-style: the engine reads every resource of the
stack's state from the cloud and reports, per resource, what a refresh would
change in the state. That is drift, seen by the provider that manages it:

- a resource the refresh would *delete* from the state is gone from the
  cloud (``missing``);
- a resource whose refresh reports differing properties (``diffs`` /
  ``detailedDiff``) has ``changed``; only the properties the engine names are
  compared, so computed outputs that move on their own (etags, timestamps)
  never count as drift.

Expected and observed both come from the same events: the stack state before
(``old``) and after (``new``) the refresh. Items are keyed by their Azure
resource id when the outputs carry one (so the ARM observer's listing joins
them), else by URN.

Where the CLI is missing (these development machines cannot download it) the
observer raises :class:`ObservationFailed` saying so; the inventory then shows
the environment stale with that reason. :func:`observation_from_refresh` is
pure and tested with engine events in the CLI's JSON format.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from typing import Any

from shared.iac.api import clean, is_infrastructure, property_at, resource_name
from shared.inventory.model import ExpectedResource, Observation, ObservedItem
from shared.inventory.observers.base import ObservationFailed, ObservationRequest
from shared.platform import clock

GONE_OPS = {"delete", "delete-replaced", "discard"}


class PulumiRefreshObserver:
    name = "pulumi-refresh-preview"

    def __init__(self, backend_url: str | None, work_root: str | None) -> None:
        self._backend_url = backend_url
        self._work_root = work_root

    @staticmethod
    def available() -> bool:
        return shutil.which("pulumi") is not None

    def observe(self, request: ObservationRequest) -> Observation:
        if not self.available():
            raise ObservationFailed("the Pulumi CLI is not installed on this host: a refresh preview cannot run")
        from shared.iac.api import EventCollector, locate_program, open_stack, stack_configuration

        events = EventCollector()
        try:
            location = locate_program(request.specification, self._work_root)
            stack = open_stack(location, self._backend_url)
            stack.set_all_config(stack_configuration(request.specification, request.target))
            stack.preview_refresh(on_event=events, color="never")
        except Exception as error:  # every CLI failure means "could not observe"
            reason = [line for line in str(error).splitlines() if line.strip()][-1:] or [type(error).__name__]
            raise ObservationFailed(f"refresh preview of {request.environment} failed: {reason[0][:500]}") from error
        return observation_from_refresh(events.events, request.target.id)


def observation_from_refresh(events: Iterable[Any], target_id: str, observed_at: str | None = None) -> Observation:
    """Expected (state before refresh) and observed (after) from a refresh preview's engine events."""
    steps: dict[str, Any] = {}
    for event in sorted(events, key=lambda e: e.sequence):
        step = event.resource_pre_event or event.res_outputs_event
        if step is not None and is_infrastructure(step.metadata.type):
            steps[step.metadata.urn] = step.metadata  # the last word on each URN
    expected: list[ExpectedResource] = []
    items: list[ObservedItem] = []
    for urn, metadata in steps.items():
        old = clean(metadata.old.outputs) if metadata.old is not None else None
        new = clean(metadata.new.outputs) if metadata.new is not None else None
        if old is None:
            continue  # not in the stack's state: a refresh says nothing about it
        key = _key(urn, old)
        paths = sorted(set(metadata.diffs or []) | set((metadata.detailed_diff or {}).keys()))
        expected.append(
            ExpectedResource(
                key=key,
                address=urn,
                type=metadata.type,
                name=resource_name(urn),
                state=_subset(old, paths),
                compared_fields=tuple(paths),
            )
        )
        op = getattr(metadata.op, "value", metadata.op)
        if op in GONE_OPS or new is None:
            continue
        items.append(
            ObservedItem(
                key=key,
                address=urn,
                type=metadata.type,
                name=resource_name(urn),
                state=_subset(new, paths),
                properties={"op": op},
            )
        )
    return Observation(
        observer=PulumiRefreshObserver.name,
        target=target_id,
        observed_at=observed_at or clock.now_iso(),
        items=items,
        expected=expected,
    )


def _key(urn: str, outputs: dict[str, Any]) -> str:
    resource_id = str(outputs.get("id") or "")
    return resource_id.lower() if resource_id.lower().startswith("/subscriptions/") else urn


def _subset(document: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """The named properties only, each under its engine path (``tags.env``, ``rules[0].port``)."""
    return {path: property_at(document, path) for path in paths}
