"""The one interface every IaC runner implements, and what it produces.

A runner *plans* (compares desired state with the target's actual state and
lists per-resource changes with field-level before/after) and *applies* exactly
a plan it produced. Apply must be idempotent per run and step: the provisioning
module hands the runner a :class:`StepJournal` (durable, per run) so that a
retried apply skips what is already done and never creates anything twice.

If the target changed since the plan so that it no longer holds, apply raises
:class:`PlanNoLongerHolds` before touching that resource: nothing that nobody
reviewed is ever applied.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any, Protocol

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from shared.desired_state.api import EnvironmentSpecification
from shared.platform.errors import RuntimeCloudError
from shared.platform.targets import ProvisioningTarget


class Action(str, Enum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    NO_CHANGE = "no-change"
    # Delete-then-create (or create-then-delete) of one resource: Pulumi plans it when
    # a property cannot be changed in place. Kept apart from UPDATE because a reviewer
    # must see that the resource (and its data) is destroyed. The embedded runner never
    # plans it.
    REPLACE = "replace"


# A plan's counts: how many changes of each action (every action named, 0 when none). Kept as a plain
# mapping where it is stored and sent; the document states its keys.
def _every_action_counted(counts: dict[str, int]) -> dict[str, int]:
    """Counts stored before an action existed (``replace``) read with that action at 0, as documented."""
    return {action.value: counts.get(action.value, 0) for action in Action} | counts


PlanCounts = Annotated[
    dict[str, int],
    AfterValidator(_every_action_counted),
    WithJsonSchema(
        {
            "type": "object",
            "description": "how many of the plan's changes take each action",
            "properties": {action.value: {"type": "integer", "minimum": 0} for action in Action},
            "required": [action.value for action in Action],
            "additionalProperties": False,
        }
    ),
]


class FieldChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str  # e.g. "metadata.owner"
    before: Any = None
    after: Any = None


class ResourceChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    address: str  # "<type>/<name>", e.g. "queue/orders", or a Pulumi URN
    type: str
    name: str
    action: Action
    before: dict[str, Any] | None = None  # the target's state when planned (None: absent)
    after: dict[str, Any] | None = None  # the desired state (None: to be deleted)
    fields: list[FieldChange] = Field(default_factory=list)


class PlanResult(BaseModel):
    runner: str
    runner_version: str
    changes: list[ResourceChange]
    diagnostics: list[str] = Field(default_factory=list)
    # What the runner's apply is bound to besides ``changes``, recorded in the receipt so
    # that the approval's digest covers it; e.g. the Pulumi runner's saved update plan
    # (``pulumi_plan_sha256``). Empty for the embedded runner, whose changes are the plan.
    binding: dict[str, str] = Field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        counts = {action.value: 0 for action in Action}
        for change in self.changes:
            counts[change.action.value] += 1
        return counts


class StepStatus(str, Enum):
    APPLIED = "applied"
    UNCHANGED = "unchanged"
    FAILED = "failed"


class StepResult(BaseModel):
    address: str
    action: Action
    status: StepStatus
    started_at: str
    finished_at: str
    outputs: dict[str, Any] = Field(default_factory=dict)
    message: str = ""


class ApplyResult(BaseModel):
    runner: str
    runner_version: str
    steps: list[StepResult]
    outputs: dict[str, Any] = Field(default_factory=dict)
    logs: list[str] = Field(default_factory=list)


class RunnerError(RuntimeCloudError):
    """Base of the failures a runner reports; the run records the message.

    An apply that fails part-way carries ``result``: the steps finished before
    the failure (also in the journal), so the apply receipt can list them.
    """

    def __init__(self, message: str, result: ApplyResult | None = None) -> None:
        super().__init__(message)
        self.result = result


class TargetUnreachable(RunnerError):
    """The target's API did not answer (or refused the credential).

    From ``plan`` (or a read): nothing was read, which is never "the target is
    empty". From ``apply``: ``result`` lists the steps finished before it stopped
    answering; a retry with the same journal continues from there.
    """


class PlanNoLongerHolds(RunnerError):
    """The target changed since the plan was made; a new plan must be reviewed."""


class ApplyFailed(RunnerError):
    """A step failed; ``result`` holds what was done before it."""

    result: ApplyResult

    def __init__(self, message: str, result: ApplyResult) -> None:
        super().__init__(message, result)


class ApplySliceEnded(RunnerError):
    """The apply reached its slice's deadline between two steps; ``result`` holds what it did.

    Not a failure: the same apply is called again (a new activity, with a new
    ``functionTimeout``) and the journal lets it go on from the next step. An
    apply that cannot stop between steps ignores the deadline."""


class SecretUnresolvable(RuntimeCloudError):
    """A secret reference could not be resolved with the runner's identity (the app's, or the job's).

    Not a :class:`RunnerError` (no runner ran), yet a runner failure all the same: a job reports it on
    the wire (:mod:`shared.iac.jobs.failures`) and the host raises it again, as an in-process apply
    would have. Secret resolution itself is provisioning's (``shared/provisioning/configuration.py``)."""


class StepJournal(Protocol):
    """Durable record of finished steps of one run (idempotency per run and step)."""

    def finished(self, address: str) -> StepResult | None: ...

    def record(self, result: StepResult) -> None: ...

    def flush(self) -> None:
        """Make what was recorded durable; a runner calls it before it returns or raises."""


class IaCRunner(Protocol):
    name: str
    version: str

    def plan(self, specification: EnvironmentSpecification, target: ProvisioningTarget) -> PlanResult: ...

    def apply(
        self,
        specification: EnvironmentSpecification,
        target: ProvisioningTarget,
        plan: PlanResult,
        journal: StepJournal,
        resolved_configuration: dict[str, str],
        *,
        deadline: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> ApplyResult:
        """Apply ``plan``; past ``deadline`` (``time.monotonic()``), stop between two steps with
        :class:`ApplySliceEnded` once at least one step was done in this call. ``stop`` is asked
        between steps too (an operator's cancel): when it answers true, the same exception."""
        ...
