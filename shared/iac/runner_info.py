"""What the configured IaC runner is, and whether it can run here.

``embedded`` runs in process and is always available. ``pulumi`` drives the
Pulumi CLI through the Automation API, so it is available only where the CLI
is installed (these development machines cannot download it).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass

import shared
from shared.desired_state.api import RunnerName


@dataclass(frozen=True)
class RunnerInfo:
    name: str
    version: str | None
    available: bool
    detail: str


@functools.lru_cache(maxsize=4)
def describe_runner(name: RunnerName) -> RunnerInfo:
    if name is RunnerName.EMBEDDED:
        return RunnerInfo("embedded", shared.__version__, True, "in-process Azure Storage data-plane runner")
    return _describe_pulumi()


def _describe_pulumi() -> RunnerInfo:
    cli = shutil.which("pulumi")
    if cli is None:
        return RunnerInfo("pulumi", None, False, "the Pulumi CLI is not on PATH")
    try:
        completed = subprocess.run([cli, "version"], capture_output=True, text=True, timeout=10, check=True)
    except (subprocess.SubprocessError, OSError) as error:
        return RunnerInfo("pulumi", None, False, f"'pulumi version' failed: {error}")
    return RunnerInfo("pulumi", completed.stdout.strip().lstrip("v"), True, f"Pulumi CLI at {cli}")
