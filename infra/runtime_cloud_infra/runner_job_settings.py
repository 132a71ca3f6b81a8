"""The runner job's stack settings (``runnerJob*``), typed and checked against the host's own.

- ``runnerJobPollingIntervalSeconds`` (default 5, 1 to 300): how often KEDA's
  scale rule reads the job queue. A request waits half of it on average before
  its execution starts; each poll is one queue read on the host's store
  (2,592,000 / interval a month: about 0.52 million at 5 s, 2.6 million at 1 s,
  86,400 at Container Apps' own default of 30 s).
- ``runnerJobTimeoutSeconds`` (default 14400): one execution's limit. An
  unattended run plans, waits up to the host's ``RuntimeCloud__IaC__JobHandoverSeconds``
  (60 s unless ``hostSettings`` sets it) for the go, and applies, all in one
  execution, so the timeout must exceed that wait by at least
  :data:`MIN_WORK_SECONDS` (the plan and the apply); a shorter one is refused.
- ``runnerJobWarmReplicas`` (default 0, at most 20): runners kept ready beside
  the job (a Container App, ``python -m runner_job serve``); 0 declares none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from runtime_cloud_infra.config_reader import Reader, StackConfigError

HANDOVER_SETTING = "RuntimeCloud__IaC__JobHandoverSeconds"
HANDOVER_DEFAULT_SECONDS = 60.0  # shared/iac/settings.py job_handover_seconds' default
# What one execution needs beyond the handover's wait: its plan and its apply. The same floor as the timeout's
# own lowest value, which had to hold a plan or an apply before the handover put both in one execution.
MIN_WORK_SECONDS = 300
POLLING_DEFAULT_SECONDS = 5
SECONDS_A_MONTH = 30 * 24 * 3600
CPUS = ("0.5", "1.0", "1.5", "2.0", "4.0")
_MEMORY = re.compile(r"\d+(\.\d+)?Gi")


@dataclass(frozen=True)
class RunnerJobSettings:
    """The Container Apps job that runs plans and applies (runtime_cloud_infra/runner_job.py)."""

    image: str
    registry: str | None
    timeout_seconds: int
    max_executions: int
    cpu: float
    memory: str
    polling_interval_seconds: int
    warm_replicas: int

    @property
    def queue_reads_a_month(self) -> int:
        """The scale rule's reads of the job queue in 30 days: one per poll."""
        return SECONDS_A_MONTH // self.polling_interval_seconds


def runner_job_settings(reader: Reader, host_settings: Mapping[str, str]) -> RunnerJobSettings:
    cpu = reader.text("runnerJobCpu", "1.0")
    if cpu not in CPUS:
        raise StackConfigError(f"{reader.key('runnerJobCpu')} must be one of {', '.join(CPUS)}")
    memory = reader.text("runnerJobMemory", "2Gi")
    if not _MEMORY.fullmatch(memory):
        raise StackConfigError(f"{reader.key('runnerJobMemory')}: {memory!r} is not a size such as 2Gi")
    return RunnerJobSettings(
        image=reader.text("runnerJobImage", "ghcr.io/connectsoft/runtime-cloud-runner-job:latest"),
        registry=reader.optional_text("runnerJobRegistry"),
        timeout_seconds=_timeout(reader, host_settings),
        max_executions=reader.integer("runnerJobMaxExecutions", 10, 1, 100),
        cpu=float(cpu),
        memory=memory,
        polling_interval_seconds=reader.integer("runnerJobPollingIntervalSeconds", POLLING_DEFAULT_SECONDS, 1, 300),
        warm_replicas=reader.integer("runnerJobWarmReplicas", 0, 0, 20),
    )


def _timeout(reader: Reader, host_settings: Mapping[str, str]) -> int:
    """The execution's timeout, long enough for a plan, the handover's wait and an apply."""
    timeout = reader.integer("runnerJobTimeoutSeconds", 14400, MIN_WORK_SECONDS, 86400)
    handover = handover_seconds(reader, host_settings)
    if timeout < handover + MIN_WORK_SECONDS:
        raise StackConfigError(
            f"{reader.key('runnerJobTimeoutSeconds')} ({timeout}) must be at least {reader.key('hostSettings')}'s "
            f"{HANDOVER_SETTING} ({handover:g}) + {MIN_WORK_SECONDS}: an unattended run plans, waits for the "
            "handover and applies in one execution"
        )
    return timeout


def handover_seconds(reader: Reader, host_settings: Mapping[str, str]) -> float:
    raw = host_settings.get(HANDOVER_SETTING)
    if raw in (None, ""):
        return HANDOVER_DEFAULT_SECONDS
    try:
        return float(str(raw))
    except ValueError:
        raise StackConfigError(f"{reader.key('hostSettings')}: {HANDOVER_SETTING} must be a number") from None
