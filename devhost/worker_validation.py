"""Indexing the app with the Azure Functions Python worker's own code.

On Azure the Python worker imports ``function_app.py``, asks the app for its
functions and checks each one (bindings against parameters, annotations
against binding types, return types) before the host may call any. One
refused function fails the whole metadata answer: the app loads *no*
functions. The local host must not accept what the worker refuses, so it runs
the worker's loader and registry (``azure_functions_runtime``, installed by
``make setup`` into ``.venv/functions-worker``) on the same app, and refuses
to start naming every function the worker would refuse, and why.

``azure_functions_runtime`` declares Python >= 3.13 (it is the worker library
of newer Pythons) but its loader and registry are plain Python that runs on
3.11 and holds the same checks as the 3.11 worker; see
``requirements-worker.txt``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from devhost.worker_protos import worker_protos

if TYPE_CHECKING:  # (the worker's loader answers these; nothing here builds one)
    from azure.functions.decorators.function_app import Function

WORKER_PACKAGE = "azure_functions_runtime"
WORKER_PATH_SETTING = "DEVHOST_FUNCTIONS_WORKER_PATH"


@dataclass(frozen=True)
class Refusal:
    function: str
    reason: str

    def __str__(self) -> str:
        return f"{self.function}: {self.reason}"


class WorkerRefusedApp(Exception):
    """The worker would load none of the app's functions."""

    def __init__(self, refusals: list[Refusal]) -> None:
        self.refusals = refusals
        lines = "\n".join(f"  - {refusal}" for refusal in refusals)
        super().__init__(
            f"the Azure Functions Python worker refuses {len(refusals)} function(s), "
            f"so on Azure the app would load none:\n{lines}"
        )


class WorkerUnavailable(Exception):
    pass


def default_worker_path() -> Path:
    """Where ``make setup`` installs the worker library (beside the venv's packages)."""
    configured = os.environ.get(WORKER_PATH_SETTING)
    return Path(configured) if configured else Path(sys.prefix) / "functions-worker"


def index_with_worker(app_dir: Path, script: str = "function_app.py") -> list[Function]:
    """Import the app as the worker does and return its functions if the worker accepts every one.

    The worker imports the app by name (the script's stem) from the app
    folder, so that folder goes first on ``sys.path``.
    """
    loader, functions, meta = _worker_modules()
    _check_script_name(script)
    meta.load_binding_registry()
    _put_app_first_on_path(app_dir, script)
    indexed = loader.index_function_app(str(app_dir / script))  # an app that fails to import raises as is
    refusals = _validate_each(loader, functions, indexed, app_dir)
    if refusals:
        raise WorkerRefusedApp(refusals)
    return list(indexed)


def _validate_each(loader: ModuleType, functions: ModuleType, indexed: list[Function], app_dir: Path) -> list[Refusal]:
    """Every function through the worker's registry, so that all refusals are named at once."""
    protos = worker_protos()
    registry = functions.Registry()
    refusals = []
    for function in indexed:
        try:
            loader.process_indexed_function(protos, registry, [function], str(app_dir))
        except Exception as error:  # noqa: BLE001 - the worker's own errors: FunctionLoadError, NameError, TypeError...
            refusals.append(Refusal(function_name(function), _one_line(error)))
    return refusals


def function_name(function: Function) -> str:
    """A function's name: the one the app gave it, else its Python name (as the library names it
    when the worker indexes the app; its getter is typed optional for a function not yet built)."""
    return function.get_function_name() or function.get_user_function().__name__


def _worker_modules() -> tuple[ModuleType, ModuleType, ModuleType]:
    path = default_worker_path()
    if not (path / WORKER_PACKAGE).is_dir():
        raise WorkerUnavailable(
            f"the Azure Functions worker library is not at {path}; run `make setup` "
            f"(it installs requirements-worker.txt there) or set {WORKER_PATH_SETTING}"
        )
    if str(path) not in sys.path:
        sys.path.append(str(path))  # last: it must not shadow the app's own packages
    from azure_functions_runtime import functions, loader  # type: ignore[import-not-found]
    from azure_functions_runtime.bindings import meta  # type: ignore[import-not-found]

    return loader, functions, meta


def _check_script_name(script: str) -> None:
    from azure_functions_runtime.utils.validators import (  # type: ignore[import-not-found]
        InvalidFileNameError,
        validate_script_file_name,
    )

    try:
        validate_script_file_name(script)
    except InvalidFileNameError as error:
        raise WorkerRefusedApp([Refusal("(the app)", f"invalid script file name {script!r}")]) from error


def _put_app_first_on_path(app_dir: Path, script: str) -> None:
    folder = str(app_dir.resolve())
    if folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    module = sys.modules.get(Path(script).stem)
    if module is not None and Path(getattr(module, "__file__", "") or "").resolve() != (app_dir / script).resolve():
        del sys.modules[Path(script).stem]


def _one_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    first = text.splitlines()[0]
    return first if isinstance(error, RuntimeError) else f"{type(error).__name__}: {first}"
