"""The part of the Durable Functions SDK the orchestrations use, typed once.

azure-functions-durable ships no type information (pyproject.toml: ``ignore_missing_imports``),
so to mypy its blueprint's decorators are untyped and its context, tasks and client are ``Any``.
The Protocols here declare what this package calls on them, with the SDK's parameter names;
the objects stay the SDK's own (:func:`blueprint` answers a ``df.Blueprint``, the worker hands
each orchestrator the SDK's context, each trigger the SDK's client).
tests/orchestrations/test_durable_surface.py checks every method named here against the SDK,
so a Protocol cannot name what the SDK does not have.

:class:`Activity` ties an activity's name to the payload it takes and the answer it gives, so
the orchestrator's call and the activity's signature are checked against the same types. Both
are JSON in the Durable history (TypedDicts: plain dicts at run time), which is why their wire
form may change only as the orchestration-versioning rule allows (DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeAlias, TypeVar

import azure.durable_functions as df

Result = TypeVar("Result")
Payload = TypeVar("Payload")
Answer = TypeVar("Answer")


class Task(Protocol):
    """A Durable task, yielded by the orchestrator."""

    @property
    def result(self) -> Any:  # JSON from the history (an event's payload, an activity's answer)
        ...


# What an orchestrator (or a part of one, delegated to with ``yield from``) is: it yields Durable tasks,
# and the SDK resumes it with each task's result (JSON from the history, or, for ``task_any``, the task
# that completed first), so what is sent back is only as typed as the receiving variable says.
Steps: TypeAlias = Generator[Task, Any, Result]


class TimerTask(Task, Protocol):
    def cancel(self) -> None: ...


class RetryOptions(Protocol):
    @property
    def first_retry_interval_in_milliseconds(self) -> int: ...

    @property
    def max_number_of_attempts(self) -> int: ...


class OrchestrationContext(Protocol):
    """The orchestrator's context: everything it decides from (input, time, results) replays from history."""

    @property
    def current_utc_datetime(self) -> datetime: ...

    def get_input(self) -> Any: ...  # JSON: the instance's input as its history holds it

    def call_activity(self, name: str, input_: object = None) -> Task: ...

    def call_activity_with_retry(self, name: str, retry_options: RetryOptions, input_: object = None) -> Task: ...

    def create_timer(self, fire_at: datetime) -> TimerTask: ...

    def wait_for_external_event(self, name: str) -> Task: ...

    def task_any(self, activities: Sequence[Task]) -> Task: ...

    def set_custom_status(self, status: object) -> None: ...

    def continue_as_new(self, input_: object) -> None: ...


class OrchestrationStatus(Protocol):
    @property
    def runtime_status(self) -> df.OrchestrationRuntimeStatus | None: ...  # None: no such instance

    @property
    def input_(self) -> Any: ...  # JSON, with show_input

    @property
    def output(self) -> Any: ...  # JSON


class DurableClient(Protocol):
    """The Durable client a trigger gets through ``durable_client_input``."""

    async def start_new(
        self, orchestration_function_name: str, instance_id: str | None = None, client_input: object = None
    ) -> str: ...

    async def get_status(self, instance_id: str, show_input: bool = False) -> OrchestrationStatus: ...

    async def raise_event(self, instance_id: str, event_name: str, event_data: object = None) -> None: ...


class Registered(Protocol):
    """What a blueprint's decorator leaves in place of a function: the worker's function builder, which
    the worker finds through the blueprint (calling it calls the function; nothing here does)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


Decorator: TypeAlias = Callable[[Callable[..., Any]], Registered]


class DurableBlueprint(Protocol):
    """A ``df.Blueprint``: the triggers and bindings this package declares with it."""

    def orchestration_trigger(self, context_name: str, orchestration: str | None = None) -> Decorator: ...

    def activity_trigger(self, input_name: str, activity: str | None = None) -> Decorator: ...

    def durable_client_input(self, client_name: str) -> Decorator: ...

    def timer_trigger(self, arg_name: str, schedule: str) -> Decorator: ...


def blueprint() -> DurableBlueprint:
    """A blueprint of the SDK, which the app registers (``function_app.py``)."""
    made: DurableBlueprint = df.Blueprint()  # the SDK's (untyped): described by DurableBlueprint
    return made


def retry_options(*, first_retry_ms: int, max_attempts: int) -> RetryOptions:
    made: RetryOptions = df.RetryOptions(
        first_retry_interval_in_milliseconds=first_retry_ms, max_number_of_attempts=max_attempts
    )  # the SDK's (untyped): described by RetryOptions
    return made


class Activity(Generic[Payload, Answer]):
    """An activity: its name, the payload it takes and the answer it gives.

    The orchestrator calls it with :meth:`call` (``answer = yield from ACTIVITY.call(context, payload)``:
    one task yielded, exactly as ``yield context.call_activity(...)``, so a history replays the same);
    the activity is declared with :meth:`trigger`, which checks its signature against the same types.
    """

    def __init__(self, name: str, retry: RetryOptions | None = None) -> None:
        self.name = name
        self.retry = retry

    def call(self, context: OrchestrationContext, payload: Payload) -> Steps[Answer]:
        if self.retry is None:
            answer: Answer = yield context.call_activity(self.name, payload)
        else:
            answer = yield context.call_activity_with_retry(self.name, self.retry, payload)
        return answer

    def trigger(self, bp: DurableBlueprint, *, input_name: str) -> Callable[[Callable[[Payload], Answer]], Registered]:
        """The activity trigger of ``bp`` under this activity's name, for a function from payload to answer."""
        return bp.activity_trigger(input_name=input_name, activity=self.name)
