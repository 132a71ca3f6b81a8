"""Loading the function app and reading its own function metadata.

The real host indexes a v2 app through the Python worker, which imports
``function_app.py``, asks the ``FunctionApp`` for its functions and validates
each; this runs that same worker code (``devhost.worker_validation``) and
keeps, per function, the binding documents exactly as they would appear in
``function.json``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Required, TypedDict

from devhost.worker_validation import function_name, index_with_worker


class BindingJson(TypedDict, total=False):
    """One binding as ``function.json`` has it: the members the host reads (a binding may carry others)."""

    type: Required[str]
    name: Required[str]
    direction: str
    route: str | None  # httpTrigger
    methods: list[str] | None
    authLevel: str
    schedule: str  # timerTrigger
    runOnStartup: bool
    useMonitor: bool
    queueName: str  # queueTrigger
    connection: str | None
    orchestration: str | None  # orchestrationTrigger: the name it is started by
    activity: str | None  # activityTrigger
    taskHub: str | None  # durableClient


@dataclass(frozen=True)
class FunctionInfo:
    name: str
    user_function: Callable[..., Any]  # the app's function: its parameters and result are the app's
    bindings: tuple[BindingJson, ...]

    @property
    def trigger(self) -> BindingJson:
        return next(b for b in self.bindings if b["type"].lower().endswith("trigger"))

    @property
    def trigger_type(self) -> str:
        return self.trigger["type"]

    def bindings_of(self, binding_type: str) -> list[BindingJson]:
        return [b for b in self.bindings if b["type"].lower() == binding_type.lower()]


class FunctionCatalog:
    def __init__(self, functions: list[FunctionInfo]) -> None:
        self._by_name = {f.name: f for f in functions}

    def __iter__(self) -> Iterator[FunctionInfo]:
        return iter(self._by_name.values())

    def get(self, name: str) -> FunctionInfo | None:
        return self._by_name.get(name) or next(
            (f for f in self._by_name.values() if f.name.lower() == name.lower()), None
        )

    def with_trigger(self, trigger_type: str) -> list[FunctionInfo]:
        return [f for f in self if f.trigger_type.lower() == trigger_type.lower()]


def load_catalog(app_dir: Path, script: str = "function_app.py") -> FunctionCatalog:
    """The app's functions, indexed and validated by the Python worker's own code."""
    functions = [
        FunctionInfo(
            name=function_name(function),
            user_function=function.get_user_function(),
            bindings=tuple(json.loads(function.get_function_json())["bindings"]),
        )
        for function in index_with_worker(app_dir.resolve(), script)
    ]
    return FunctionCatalog(functions)
