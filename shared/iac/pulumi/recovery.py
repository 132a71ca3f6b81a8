"""What a runner job does about an update that died, and about a cancel that arrives mid-update.

**Pending operations.** A job killed during ``pulumi up`` leaves the operations
it had started in the stack's state as ``pending_operations`` (a create that
may or may not have happened in the cloud). The engine refuses to go on while
they are there, and blindly retrying a create could make a second resource.
Before every update the job reads the state; pending operations are reported
(each one named in the run's log and the apply receipt), removed from the
state, and the stack is **refreshed**, so its state matches what the cloud
really has. The update then runs with the reviewed saved plan: if the dead
job's half-done work made the world differ from what was reviewed, the engine
refuses the plan and the run fails asking for a new plan -- nothing nobody
reviewed is applied, and nothing is created twice.

**Cancel.** A Pulumi update cannot stop between resources and resume, so an
operator's cancel (the ``stop`` callable, asked every second while the update
runs) asks the engine to cancel the update (``pulumi cancel``); what finished
is recorded from the engine events and the run ends ``cancelled``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from shared.platform.logs import app_logger

logger = app_logger("iac")

POLL_SECONDS = 1.0


def clear_pending_operations(stack: Any) -> list[str]:
    """Report and clear the pending operations a dead update left; returns the log lines (empty: none)."""
    state = stack.export_stack()
    deployment = state.deployment or {}
    pending = deployment.get("pending_operations") or []
    if not pending:
        return []
    named = [f"{op.get('type', '?')} {op.get('resource', {}).get('urn', '?')}" for op in pending]
    deployment["pending_operations"] = []
    stack.import_stack(state)
    stack.refresh(color="never")
    lines = [
        f"the stack held {len(pending)} pending operation(s) left by an update that died: " + "; ".join(named),
        "they were cleared and the stack refreshed from the cloud before the reviewed plan was applied",
    ]
    for line in lines:
        logger.warning("%s", line)
    return lines


class CancelOnStop:
    """While the update runs, ask ``stop`` every second; when it answers true, cancel the update once."""

    def __init__(self, stack: Any, stop: Callable[[], bool] | None, poll_seconds: float = POLL_SECONDS) -> None:
        self._stack = stack
        self._stop = stop
        self._poll = poll_seconds
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.cancelled = False

    def __enter__(self) -> CancelOnStop:
        if self._stop is not None:
            self._thread = threading.Thread(target=self._watch, name="pulumi-cancel-watch", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=self._poll * 5)

    def _watch(self) -> None:
        assert self._stop is not None
        while not self._done.wait(self._poll):
            try:
                if not self._stop():
                    continue
            except Exception as error:  # noqa: BLE001 - the run row could not be read: ask again next second
                logger.warning("could not read whether the run was cancelled: %s", type(error).__name__)
                continue
            self.cancelled = True
            try:
                self._stack.cancel()
            except Exception as error:  # noqa: BLE001 - a backend without cancel: the update runs to its end
                logger.warning("pulumi cancel failed (%s); the update ends on its own", type(error).__name__)
            return
