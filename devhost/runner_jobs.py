"""The app's runner jobs, launched beside the local host as Azure launches them beside the Functions host.

In Azure, a Container Apps job scaled by the app's job queue runs each plan
and apply in a process of its own (``infra/`` defines it). Locally, this
extension starts the app's job scaler -- a command line, so the host never
imports the app -- which reads the same queue and forks one process per job.
The scaler is restarted if it dies (like every background loop of the host),
and stops taking work when the host stops or dies: its standard input is a
pipe from the host, closed when the host goes away. Jobs in flight finish on
their own, as a Container Apps job outlives the Functions host that asked for it.

Which command: ``DEVHOST_RUNNER_JOB_COMMAND`` (a shell-style command line;
``off`` disables it), else ``python -m runner_job scale`` when the app ships
a ``runner_job`` package; an app with neither has no runner jobs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from devhost.host import LocalHost

log = logging.getLogger("devhost.runner_jobs")

COMMAND_SETTING = "DEVHOST_RUNNER_JOB_COMMAND"
STOP_SECONDS = 10.0


def job_command(app_dir: Path, environment: Mapping[str, str]) -> list[str] | None:
    """The scaler's command line for this app, or None when it has no runner jobs."""
    configured = environment.get(COMMAND_SETTING, "").strip()
    if configured.lower() == "off":
        return None
    if configured:
        return shlex.split(configured)
    if (app_dir / "runner_job" / "__main__.py").is_file():
        return [sys.executable, "-m", "runner_job", "scale"]
    return None


class RunnerJobScaler:
    """A host extension that serves no trigger: it keeps the app's job scaler running."""

    trigger_types: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._command: list[str] | None = None
        self._app_dir = Path(".")
        self._process: asyncio.subprocess.Process | None = None
        self._stopping = False

    def attach(self, host: LocalHost) -> None:
        self._app_dir = host.app_dir
        self._command = job_command(host.app_dir, dict(os.environ))

    async def run(self) -> None:
        if self._command is None:
            return
        log.info("runner jobs: %s", " ".join(self._command))
        self._process = await asyncio.create_subprocess_exec(
            *self._command, cwd=self._app_dir, stdin=asyncio.subprocess.PIPE, env=dict(os.environ)
        )
        code = await self._process.wait()
        if not self._stopping:  # the host's supervisor starts it again
            raise RuntimeError(f"the runner job scaler exited with {code}")

    async def stop(self) -> None:
        self._stopping = True
        process = self._process
        if process is None or process.returncode is not None:
            return
        if process.stdin is not None:
            process.stdin.close()  # the scaler's signal to stop taking work
        try:
            await asyncio.wait_for(process.wait(), timeout=STOP_SECONDS)
        except TimeoutError:
            process.kill()
            await process.wait()
