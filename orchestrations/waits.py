"""Waits for an external event or a timer that an early or repeated event cannot cut short.

The Python Durable SDK keeps an event that arrives while nothing waits for its
name and hands it to *every* later wait for that name in the same execution
(``DurableOrchestrationContext._add_to_open_tasks`` replays the kept event and
never forgets it). A wake that came while an activity ran would end each
later wait at once: a check loop whose timer never gets a chance, an activity
call per round instead of one per back-off step.

So every wait here means one thing:

- a runner job's notice is raised under a name of its own attempt
  (``JobTicket["notice"]``), and once that notice woke the run, the attempt's
  later checks wait for their timer alone: the notice is sent once;
- a run's wakes (``environment-changed``, ``approval-decided``) carry a wake
  id; a wake whose id this execution already took is that kept event again,
  and the round waits for its timer instead (the id never changes across
  replays, so the choice is the same on every host that replays it).

Events without these marks (written before them) are taken as they always
were, so a history from before replays unchanged.
"""

from __future__ import annotations

from datetime import datetime

from orchestrations.durable import OrchestrationContext, Steps, TimerTask
from orchestrations.provisioning_client import RUNNER_JOB_FINISHED, WAKE
from shared.provisioning.api import JobTicket


class JobNotice:
    """The wait for one job attempt's completion notice."""

    def __init__(self, ticket: JobTicket) -> None:
        self._name = str(ticket.get("notice") or RUNNER_JOB_FINISHED)
        self._once = bool(ticket.get("notice"))  # a ticket from before waits as it was written: every round
        self.noticed = False

    def or_timer(self, context: OrchestrationContext, fire_at: datetime) -> Steps[None]:
        """Until the notice or ``fire_at``; once the notice woke the run, until ``fire_at`` alone."""
        timer = context.create_timer(fire_at)
        if self._once and self.noticed:
            yield timer
            return
        finished = context.wait_for_external_event(self._name)
        winner = yield context.task_any([finished, timer])
        if winner == finished:
            timer.cancel()
            self.noticed = True


class Wakes:
    """The wakes of one name an execution took (by id): a repeat is the SDK's kept event, not a new wake."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._taken: set[str] = set()

    def or_timer(self, context: OrchestrationContext, timer: TimerTask) -> Steps[str]:
        """Wait for a wake or ``timer``: ``"woken"``, ``"timer"``, or ``"repeat"`` when the wake was one
        already taken (``timer`` is still pending then: the caller waits for it, or cancels it)."""
        woken = context.wait_for_external_event(self._name)
        winner = yield context.task_any([woken, timer])
        if winner != woken:
            return "timer"
        if not self._fresh(woken.result):
            return "repeat"
        timer.cancel()
        return "woken"

    def _fresh(self, payload: object) -> bool:
        wake = payload.get(WAKE) if isinstance(payload, dict) else None
        if wake is None:  # a sender from before wake ids: every wake counts, as it did
            return True
        if wake in self._taken:
            return False
        self._taken.add(str(wake))
        return True
