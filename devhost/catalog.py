"""Loading the function app and reading its own function metadata.

The real host indexes a v2 app by importing ``function_app.py`` and asking the
``FunctionApp`` for its functions; this does the same and keeps, per function,
the binding documents exactly as they would appear in ``function.json``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import azure.functions as func


@dataclass(frozen=True)
class FunctionInfo:
    name: str
    user_function: Callable[..., Any]
    bindings: tuple[dict[str, Any], ...]

    @property
    def trigger(self) -> dict[str, Any]:
        return next(b for b in self.bindings if b["type"].lower().endswith("trigger"))

    @property
    def trigger_type(self) -> str:
        return self.trigger["type"]

    def bindings_of(self, binding_type: str) -> list[dict[str, Any]]:
        return [b for b in self.bindings if b["type"].lower() == binding_type.lower()]


class FunctionCatalog:
    def __init__(self, functions: list[FunctionInfo]) -> None:
        self._by_name = {f.name: f for f in functions}

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._by_name.values())

    def get(self, name: str) -> FunctionInfo | None:
        return self._by_name.get(name) or next(
            (f for f in self._by_name.values() if f.name.lower() == name.lower()), None
        )

    def with_trigger(self, trigger_type: str) -> list[FunctionInfo]:
        return [f for f in self if f.trigger_type.lower() == trigger_type.lower()]


def load_catalog(app_dir: Path, script: str = "function_app.py") -> FunctionCatalog:
    app = _import_app(app_dir, script)
    functions = [
        FunctionInfo(
            name=function.get_function_name(),
            user_function=function.get_user_function(),
            bindings=tuple(json.loads(function.get_function_json())["bindings"]),
        )
        for function in app.get_functions()
    ]
    return FunctionCatalog(functions)


def _import_app(app_dir: Path, script: str) -> func.FunctionRegister:
    path = (app_dir / script).resolve()
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("function_app", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no function app at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["function_app"] = module
    spec.loader.exec_module(module)
    apps = [value for value in vars(module).values() if isinstance(value, func.FunctionRegister)]
    if len(apps) != 1:
        raise ValueError(f"{path} must define exactly one FunctionApp; found {len(apps)}")
    return apps[0]
