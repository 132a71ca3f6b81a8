"""What a runner job may touch in the host's storage account: these tables, containers and queues, nothing else.

The runner job carries only the runner identity, and it runs Pulumi programs
that tenants supply: any code in its container can ask for that identity's
tokens. So the runner identity's storage rights are role assignments scoped
to each resource named here (never to the account), and the job is written
to need no other: it never reads ``ProvisioningRuns``, the receipts or any
other host table, container or queue. A cancel reaches a running job through
its own ``RunnerJobs`` row (``CancelRequested``), and the host -- never the
job -- writes receipts, after checking the digests of what the job hands back.

``infra/`` grants the runner identity exactly these (its access-matrix test
compares the role assignments with them), and
``tests/provisioning/test_runner_job_boundary.py`` runs real jobs while recording every storage
request it makes, and checks that each one names a resource here.

- tables: ``RunnerJobs`` (claim, heartbeat, finish, cancel flag, stack-lock
  owners, the handover's answer on the plan job's own row),
  ``ProvisioningSteps`` (the apply's step journal);
- containers: ``runner-jobs`` (its input; its result, log and outputs),
  ``pulumi-plans`` (saved update plans), ``pulumi-state`` (the Pulumi azblob
  backend, reached by the Pulumi CLI);
- queues: the job queue (``JobQueue``: requests taken and deleted; KEDA's
  scaler reads its length), its ``-poison`` queue (a message that is not a job
  request is kept there) and the completion queue (``JobResultsQueue``: the
  notices it sends).
"""

from __future__ import annotations

from shared.iac.jobs.store import JOBS_CONTAINER, JOBS_TABLE
from shared.iac.pulumi.saved_plans import PLANS_CONTAINER
from shared.iac.settings import IaCSettings

STEPS_TABLE = "ProvisioningSteps"  # the apply step journal (shared.provisioning.journal) writes here
PULUMI_STATE_CONTAINER = "pulumi-state"  # the backend URL infra/ gives the job: azblob://pulumi-state

POISON_SUFFIX = "-poison"


def poison_queue(job_queue: str) -> str:
    """Where a job keeps a message that is not a job request (so KEDA does not start it again and again)."""
    return f"{job_queue}{POISON_SUFFIX}"


def runner_job_queues(iac: IaCSettings) -> frozenset[str]:
    """The queues a job of an installation with these settings touches."""
    return frozenset({iac.job_queue, poison_queue(iac.job_queue), iac.job_results_queue})


RUNNER_JOB_TABLES: frozenset[str] = frozenset({JOBS_TABLE, STEPS_TABLE})
RUNNER_JOB_CONTAINERS: frozenset[str] = frozenset({JOBS_CONTAINER, PLANS_CONTAINER, PULUMI_STATE_CONTAINER})
RUNNER_JOB_QUEUES: frozenset[str] = runner_job_queues(IaCSettings())  # the defaults of shared/iac/settings.py
