"""``RuntimeCloud:IaC:*``: which runner applies by default, how it paces and slices an apply, and its runner jobs.

Runner jobs (``JobLauncher``, default ``queue``): plan and apply run in a job
process, not in a Functions activity. The app writes the job's input to blob
and a small request to the ``JobQueue`` queue; in Azure a Container Apps job,
scaled by that queue (KEDA ``azure-queue``), runs it as the runner identity;
locally the local host's job scaler forks a process per request. The job
writes a heartbeat every ``JobHeartbeatSeconds``; the run's orchestration
checks it every ``JobCheckSeconds`` (and when the job's completion message
wakes it); the first check, right after the launch, waits up to ``JobWaitSeconds``
for a short job to finish. A job with no heartbeat for ``JobStaleSeconds`` (or none at all
within ``JobStartSeconds`` of its launch) is dead: it is launched again (a new
attempt; the step journal makes the apply go on where the dead one stopped)
up to ``JobMaxAttempts`` in all, then the run fails with a receipt.
``in-process`` runs the runner inside the activity (in slices), as before
runner jobs: a **local-only** mode (a local host with no job consumer). On
Azure it is refused at start: the function app carries no identity that can
change targets (only the runner job has one), and a runner in the app's
process would run tenants' programs beside the host's identity. The app knows
it runs on Azure by the variables the Functions platform sets on every
instance (:data:`AZURE_HOST_VARIABLES`), never by a setting of its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from shared.desired_state.api import RunnerName
from shared.iac.stacks import parse_adopted
from shared.platform.settings_section import Section

JobLauncherKind = Literal["queue", "in-process"]

# Set by the Functions platform on its instances, never by the local host or Core Tools: App Service and
# Elastic Premium (WEBSITE_INSTANCE_ID), Linux Consumption and Flex Consumption (CONTAINER_NAME, and
# WEBSITE_SKU=FlexConsumption), every site (WEBSITE_SITE_NAME). Any one of them means "on Azure".
AZURE_HOST_VARIABLES = ("WEBSITE_INSTANCE_ID", "WEBSITE_SITE_NAME", "CONTAINER_NAME", "WEBSITE_SKU")


def on_azure(environment: Mapping[str, str] | None = None) -> str | None:
    """The platform variable that says this process runs on Azure (None: it does not)."""
    values = os.environ if environment is None else environment
    return next((name for name in AZURE_HOST_VARIABLES if values.get(name)), None)


class IaCSettings(Section):
    runner: RunnerName = Field(default=RunnerName.PULUMI, alias="Runner")
    # Pause between resource changes of one apply, to stay under a target API's rate limits.
    step_interval_seconds: float = Field(default=0.0, ge=0, le=60, alias="StepIntervalSeconds")
    # An in-process apply runs in slices of about this long, each one activity call: a slice plus one last step
    # (at most a minute's pause and a target's retries) stays far inside the 30-minute functionTimeout,
    # so no apply is ever cut off there. 0 stops after every change. A runner job is not sliced.
    apply_slice_seconds: float = Field(default=300.0, ge=0, le=1200, alias="ApplySliceSeconds")
    pulumi_backend_url: str | None = Field(default=None, alias="PulumiBackendUrl")
    pulumi_work_root: str | None = Field(default=None, alias="PulumiWorkRoot")
    # Where stack secrets are encrypted: in Azure a Key Vault key (``azurekeyvault://<vault>.vault.azure.net/keys/<key>``)
    # the runner identity may use; unset, the backend's default (a passphrase, for local programs only).
    pulumi_secrets_provider: str | None = Field(default=None, alias="PulumiSecretsProvider")
    # Stacks bootstrapped by hand that one environment takes over under their own name (JSON,
    # ``{"<tenant>/<environment>": "<stack>"}``); every other environment's stack is ``<tenant>.<environment>``
    # (see shared.iac.stacks).
    pulumi_adopted_stacks: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict, alias="PulumiAdoptedStacks"
    )
    # Runner jobs (see the module docstring).
    job_launcher: JobLauncherKind = Field(default="queue", alias="JobLauncher")
    job_queue: str = Field(default="runner-jobs", pattern=r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", alias="JobQueue")
    # Where jobs send their completion notices (a queue trigger of the app reads it).
    job_results_queue: str = Field(
        default="runner-job-results", pattern=r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$", alias="JobResultsQueue"
    )
    job_heartbeat_seconds: float = Field(default=10.0, gt=0, le=300, alias="JobHeartbeatSeconds")
    job_stale_seconds: float = Field(default=90.0, gt=0, le=3600, alias="JobStaleSeconds")
    # How long a runner job waits out a store outage (its journal, cancel-flag, result and notice calls tried
    # again with jittered back-off) before it gives up as it would have at once; see job_outage_seconds.
    job_store_outage_seconds: float = Field(default=60.0, ge=0, le=3600, alias="JobStoreOutageSeconds")
    # Three minutes: a request is taken hidden, not deleted, and leaves the queue only once its job claimed
    # its row (runner_job.scaler), so a launcher killed in between loses nothing: the request shows again
    # after a third of this (``take_seconds``) and the next poll (KEDA's 5 s, the local scaler's 0.1 s) starts
    # it; with a Container Apps execution's start (its image pulled, tens of seconds) a live queue starts
    # every job well inside it. Past it nothing consumes the queue: the attempt is dead and launched again.
    job_start_seconds: float = Field(default=180.0, gt=0, le=7200, alias="JobStartSeconds")
    job_check_seconds: float = Field(default=30.0, gt=0, le=600, alias="JobCheckSeconds")
    job_max_attempts: int = Field(default=2, ge=1, le=5, alias="JobMaxAttempts")
    # How long the step called right after a launch waits, inside its activity, for a short job to finish
    # (reading the job's row with a short backoff) before the run waits on the notice and the check timer:
    # a job of a second is found within tens of milliseconds instead of at the next queue poll. 0: never.
    job_wait_seconds: float = Field(default=2.0, ge=0, le=30, alias="JobWaitSeconds")
    # How long a plan job of a run that needs no approval waits, after handing over its plan, for the host's
    # go (it then applies in the same execution: one job start per run) or stop; past it, it ends and the
    # apply takes a job of its own from the queue. 0: never (every run starts two jobs).
    job_handover_seconds: float = Field(default=60.0, ge=0, le=600, alias="JobHandoverSeconds")

    @property
    def job_outage_seconds(self) -> float:
        """How long a job rides out a store outage: ``JobStoreOutageSeconds``, but never so long that the
        host declares it dead meanwhile. Its heartbeat lands again within one beat of the store's return,
        so a silence of the outage plus two beats must stay inside ``JobStaleSeconds``."""
        return max(0.0, min(self.job_store_outage_seconds, self.job_stale_seconds - 2 * self.job_heartbeat_seconds))

    @property
    def take_seconds(self) -> float:
        """How long a taken job request stays hidden before its job claims its row (then it is deleted):
        a third of ``JobStartSeconds``, at most a minute, so a request a dead launcher took shows again,
        and is started, well before the attempt would be given up."""
        return max(1.0, min(60.0, self.job_start_seconds / 3))

    @field_validator("job_launcher")
    @classmethod
    def _local_only(cls, value: JobLauncherKind) -> JobLauncherKind:
        if value == "in-process" and (marker := on_azure()):
            raise ValueError(
                f"in-process is a local-only mode, refused on Azure ({marker} is set): plan and apply run in the "
                "runner job there, with the runner identity; remove RuntimeCloud__IaC__JobLauncher or set it to queue"
            )
        return value

    @field_validator("pulumi_adopted_stacks", mode="before")
    @classmethod
    def _adopted(cls, value: Any) -> dict[str, str]:
        return parse_adopted(value)
