"""A run's own copy of a Pulumi program: Pulumi writes there, never into the program's folder.

The runner job's image holds its programs read-only, owned by root, and runs
as an unprivileged user; a checkout on a developer's machine is someone's
working tree. Pulumi writes into the folder it runs in (``Pulumi.<stack>.yaml``
from ``stack.set_all_config``, Python's ``__pycache__``) and its Python
language host creates the virtualenv the project names when that is missing.
So each plan or apply runs in a fresh copy of the program, made in a folder of
the process's own (``RUNTIME_CLOUD_PULUMI_WORKSPACE``; unset, the system's
temporary folder) and removed when the run ends.

The copy's ``Pulumi.yaml`` names an absolute virtualenv, so Pulumi never
creates one at run time: ``RUNTIME_CLOUD_PULUMI_VIRTUALENV`` when set (the
runner job's image builds it from ``infra/requirements.txt``, with the
providers' SDKs its programs use), else the project's own setting resolved
against the original folder (``infra/``'s ``../.venv`` is the repository's, as
``make deploy`` uses it). A named virtualenv that does not exist is refused
before Pulumi starts.

The stack file is gone after the run: Pulumi finds the stack's secrets
provider in the stack's state when its stack file does not name one (it
records it there on every update), and the runner sets the whole
configuration on every run.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from shared.iac.model import RunnerError
from shared.iac.pulumi.workspace import PROJECT_FILES, ProgramLocation

# The runner job's image sets both (runner_job/Dockerfile; tests/iac/test_runner_image.py checks they agree).
WORKSPACE_VARIABLE = "RUNTIME_CLOUD_PULUMI_WORKSPACE"
VIRTUALENV_VARIABLE = "RUNTIME_CLOUD_PULUMI_VIRTUALENV"
NOT_COPIED = ("__pycache__", "*.pyc", ".git")


class VirtualenvMissing(RunnerError):
    """The program's virtualenv is not there: Pulumi would create it at run time (and download into it)."""


def workspace_root() -> Path:
    """Where this process makes its runs' copies."""
    return Path(os.environ.get(WORKSPACE_VARIABLE) or tempfile.gettempdir())


@contextmanager
def program_copy(location: ProgramLocation) -> Iterator[ProgramLocation]:
    """The program copied into a new folder of the workspace, as a location to open the stack in."""
    root = workspace_root()
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"{location.project}-", dir=root))
    try:
        copy = folder / location.program_dir.name
        virtualenv = _copy_program(location.program_dir, copy)
        # os.access, not exists(): a virtualenv the user cannot reach is as missing as an absent one.
        if virtualenv is not None and not os.access(virtualenv / "bin" / "python", os.X_OK):
            raise VirtualenvMissing(
                f"the virtualenv of Pulumi program {location.program_dir.name} ({virtualenv}) is missing or not "
                "usable by this process's user: build it before the run (the runner job's image does), "
                "so Pulumi does not create it"
            )
        yield replace(location, work_root=folder, program_dir=copy)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _copy_program(source: Path, copy: Path) -> Path | None:
    """Copy the program (writable: the originals may be read-only) and point its project at its virtualenv."""
    project_file = next(source / name for name in PROJECT_FILES if (source / name).is_file())
    project = yaml.safe_load(project_file.read_text(encoding="utf-8")) or {}
    virtualenv = _virtualenv(project, source)
    skipped = [virtualenv.name] if virtualenv is not None and virtualenv.parent == source else []
    # Links are followed: a relative one would point elsewhere from the copy; the copy reads as the original did.
    ignored = shutil.ignore_patterns(*NOT_COPIED, *skipped)
    shutil.copytree(source, copy, ignore=ignored, symlinks=False)
    for folder, _, files in os.walk(copy):
        for path in [Path(folder), *(Path(folder) / name for name in files)]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
    if virtualenv is not None:
        _set_virtualenv(project, virtualenv)
        is_json = project_file.suffix == ".json"
        text = json.dumps(project, indent=2) if is_json else yaml.safe_dump(project, sort_keys=False)
        (copy / project_file.name).write_text(text, encoding="utf-8")
    return virtualenv


def _virtualenv(project: dict[str, Any], source: Path) -> Path | None:
    """The absolute virtualenv a Python program runs in (None: not Python, or Python as found on PATH)."""
    runtime = project.get("runtime")
    name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if name != "python":
        return None
    override = os.environ.get(VIRTUALENV_VARIABLE)
    if override:
        return Path(override)
    options = runtime.get("options") if isinstance(runtime, dict) else None
    named = (options or {}).get("virtualenv")
    return (source / named).resolve() if named else None


def _set_virtualenv(project: dict[str, Any], virtualenv: Path) -> None:
    runtime = project.get("runtime")
    if not isinstance(runtime, dict):
        runtime = project["runtime"] = {"name": runtime}
    options = runtime["options"] = runtime.get("options") or {}
    options["virtualenv"] = str(virtualenv)
    # A prebuilt virtualenv is pip's layout; poetry or uv would build their own environment at run time.
    options["toolchain"] = "pip"
