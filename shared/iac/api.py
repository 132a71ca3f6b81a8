"""What provisioning, inventory, the triggers and the runner job may use of the IaC runners:
the runner model, the runner-job protocol and the job's journal and failures.

Other features, the triggers (``functions/``, ``orchestrations/``), health and the runner job
import only this module of the package; only the composition root (``shared/wiring``) reaches
inside (the "api-only" contract in pyproject.toml).
"""

from __future__ import annotations

from shared.iac.embedded.access import AccessPolicy
from shared.iac.embedded.observed import ObservedResource, ObservedState, lookup_key
from shared.iac.embedded.reader import Keep, read_target_state
from shared.iac.embedded.state import desired_state, field_changes, flatten
from shared.iac.jobs.access import STEPS_TABLE
from shared.iac.jobs.event_log import EventLog
from shared.iac.jobs.failures import Kind, RunnerFailure, applied_before, from_wire, kind_of, to_wire
from shared.iac.jobs.handover import Handover
from shared.iac.jobs.health import job_path_health
from shared.iac.jobs.launcher import QueueJobLauncher
from shared.iac.jobs.liveness import liveness
from shared.iac.jobs.lock_owners import JobLockOwners
from shared.iac.jobs.outage import StoreOutage
from shared.iac.jobs.protocol import JobFailure, JobInput, JobKind, JobNotice, JobRequest, JobResult, job_id_for
from shared.iac.jobs.results import JobResults, JobResultTampered
from shared.iac.jobs.store import JobInputTampered, JobRecord, JobStore, folder_of
from shared.iac.model import (
    Action,
    ApplyResult,
    ApplySliceEnded,
    PlanCounts,
    PlanNoLongerHolds,
    PlanResult,
    ResourceChange,
    RunnerError,
    SecretUnresolvable,
    StepJournal,
    StepResult,
    TargetUnreachable,
)
from shared.iac.pulumi.events import clean, is_infrastructure, property_at, resource_name
from shared.iac.pulumi.locks import LockOwners
from shared.iac.pulumi.runner import EventCollector, PulumiRunner
from shared.iac.pulumi.saved_plans import PLANS_CONTAINER, SavedPlans
from shared.iac.pulumi.workspace import locate_program, open_stack, stack_configuration
from shared.iac.registry import runner_for
from shared.iac.runner_info import describe_runner
from shared.iac.settings import IaCSettings
from shared.iac.stacks import stack_problem
from shared.iac.tags import ENVIRONMENT_KEY, ManagementTags, split_metadata

__all__ = [
    "AccessPolicy",
    "Action",
    "ApplyResult",
    "ApplySliceEnded",
    "ENVIRONMENT_KEY",
    "EventCollector",
    "EventLog",
    "Handover",
    "IaCSettings",
    "JobFailure",
    "JobInput",
    "JobInputTampered",
    "JobKind",
    "JobLockOwners",
    "JobNotice",
    "JobRecord",
    "JobRequest",
    "JobResult",
    "JobResultTampered",
    "JobResults",
    "JobStore",
    "Keep",
    "Kind",
    "LockOwners",
    "ManagementTags",
    "ObservedResource",
    "ObservedState",
    "PLANS_CONTAINER",
    "PlanCounts",
    "PlanNoLongerHolds",
    "PlanResult",
    "PulumiRunner",
    "QueueJobLauncher",
    "ResourceChange",
    "RunnerError",
    "RunnerFailure",
    "STEPS_TABLE",
    "SavedPlans",
    "SecretUnresolvable",
    "StepJournal",
    "StepResult",
    "StoreOutage",
    "TargetUnreachable",
    "applied_before",
    "clean",
    "describe_runner",
    "desired_state",
    "field_changes",
    "flatten",
    "folder_of",
    "from_wire",
    "is_infrastructure",
    "job_id_for",
    "job_path_health",
    "kind_of",
    "liveness",
    "locate_program",
    "lookup_key",
    "open_stack",
    "property_at",
    "read_target_state",
    "resource_name",
    "runner_for",
    "split_metadata",
    "stack_configuration",
    "stack_problem",
    "to_wire",
]
