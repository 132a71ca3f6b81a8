"""What every read that meets a stored document the server cannot read must answer, and what the log says.

The answer is the generic 500 problem, naming nothing of the row nor of pydantic; the host's log (which
reaches the host's file a little after the answer) names the row and the failing field, never its value.
Used by tests/provisioning/test_unreadable_run.py and tests/inventory/test_unreadable_finding.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tests.support.host import HostProcess, wait_until

MARKER = "row-value-f00d"  # what the broken field holds: neither the answer nor the log may quote it
INTERNAL_ERROR = "urn:runtime-cloud:problem:internal-error"


def assert_answers_name_nothing(
    host: HostProcess,
    token: str,
    reads: Iterable[tuple[str, dict[str, Any] | None]],
    leaks: Iterable[str],
) -> list[str]:
    """GET each (path, query): the generic 500 quoting none of ``leaks`` nor :data:`MARKER`; its references."""
    leaks = [MARKER, "validation", "pydantic", *leaks]
    references = []
    for path, params in reads:
        answer = host.request("GET", path, token=token, params=params)
        assert answer.status_code == 500, (path, params, answer.status_code, answer.text)
        assert answer.headers["Content-Type"].startswith("application/problem+json")
        problem = answer.json()
        assert problem["type"] == INTERNAL_ERROR and "errors" not in problem, problem
        for leak in leaks:
            assert leak not in answer.text, (leak, answer.text)
        references.append(problem["detail"].rsplit(" ", 1)[-1])
    return references


def assert_log_names_the_row(host: HostProcess, references: list[str], where: str, failure: str) -> None:
    """The host log has every reference the callers were given, the row (``where``) and the failure, not the value."""

    def logged() -> str | None:
        text = host.log()
        return text if all(reference in text for reference in references) else None

    log = wait_until(logged, message="the host log names every reference the callers were given")
    assert where in log and failure in log
    assert MARKER not in log
