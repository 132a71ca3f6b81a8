"""The blueprint every trigger module declares its functions with, typed.

A trigger module's ``bp`` is the SDK's ``df.Blueprint`` (the app registers it,
``function_app.py``), which azure-functions-durable ships without type
information: to mypy its decorators would be untyped and turn each decorated
function into ``Any``. :class:`TriggerBlueprint` declares the decorators the
trigger modules use, with the SDK's parameter names: the HTTP route and the
queue trigger here, the timer and the Durable client from the orchestrations'
:class:`~orchestrations.durable.DurableBlueprint`. tests/test_trigger_blueprint.py
checks each one against the SDK, so the Protocol cannot name what it does not have.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import azure.durable_functions as df
import azure.functions as func

from orchestrations.durable import Decorator, DurableBlueprint


class TriggerBlueprint(DurableBlueprint, Protocol):
    """A ``df.Blueprint`` as the trigger modules use it: HTTP routes, queue and timer triggers, the Durable client."""

    def route(
        self,
        route: str | None = None,
        trigger_arg_name: str = "req",
        binding_arg_name: str = "$return",
        methods: Iterable[str] | None = None,
        auth_level: func.AuthLevel | str | None = None,
    ) -> Decorator: ...

    def queue_trigger(self, arg_name: str, queue_name: str, connection: str) -> Decorator: ...


def trigger_blueprint(http_auth_level: func.AuthLevel = func.AuthLevel.FUNCTION) -> TriggerBlueprint:
    """A blueprint of the SDK (its default auth level unless told; the HTTP pipeline checks bearer tokens)."""
    made: TriggerBlueprint = df.Blueprint(http_auth_level=http_auth_level)  # the SDK's (untyped): described above
    return made
