"""An orchestration instance's row in ``<hub>Instances``: its status and where its history ends.

The row is the commit point of every episode: history rows beyond
``history_length`` are ignored until a row update (conditional on the row's
ETag) says they belong, so an episode cut short by a crash leaves nothing
half-applied. The messages an episode implies (activity work items, timers,
sub-orchestration starts, a parent's notice) are sent before that update, as
the Azure Storage provider sends them before its checkpoint: committed
history never waits on a message that was not sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import Enum

from devhost.durable.history import FailureDetails, ParentInstance, now


class RuntimeStatus(str, Enum):
    PENDING = "Pending"
    RUNNING = "Running"
    COMPLETED = "Completed"
    CONTINUED_AS_NEW = "ContinuedAsNew"
    FAILED = "Failed"
    TERMINATED = "Terminated"
    SUSPENDED = "Suspended"

    @property
    def finished(self) -> bool:
        return self in (RuntimeStatus.COMPLETED, RuntimeStatus.FAILED, RuntimeStatus.TERMINATED)


@dataclass(frozen=True)
class ParentRef:
    """The orchestration that started this one as a sub-orchestration, and the task id it waits on."""

    instance_id: str
    execution_id: str
    task_id: int
    name: str = ""

    def to_event(self) -> ParentInstance:
        return {
            "Name": self.name,
            "Version": "",
            "TaskScheduleId": self.task_id,
            "OrchestrationInstance": {"InstanceId": self.instance_id, "ExecutionId": self.execution_id},
        }

    @classmethod
    def from_event(cls, value: ParentInstance | None) -> ParentRef | None:
        if not value:
            return None
        instance = value["OrchestrationInstance"]
        return cls(
            str(instance["InstanceId"]),
            str(instance["ExecutionId"]),
            int(value["TaskScheduleId"]),
            str(value.get("Name") or ""),
        )


@dataclass
class InstanceState:
    instance_id: str
    name: str
    execution_id: str
    status: RuntimeStatus = RuntimeStatus.PENDING
    input: str | None = None
    output: str | None = None
    custom_status: str | None = None
    created: datetime = field(default_factory=now)
    updated: datetime = field(default_factory=now)
    parent: ParentRef | None = None
    history_length: int = 0
    failure: FailureDetails | None = None
    etag: str | None = None

    def copy(self, **changes: object) -> InstanceState:
        return replace(self, **changes)  # type: ignore[arg-type]
