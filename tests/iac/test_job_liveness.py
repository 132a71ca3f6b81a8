"""Whether a runner job lives, from its row alone (pure: no storage, no clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from shared.iac.jobs.liveness import liveness
from shared.iac.jobs.store import JobRecord

LAUNCHED = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def record(state: str = "running", beat: datetime | None = None) -> JobRecord:
    return JobRecord(
        job_id="run-1-apply-1", state=state, launched_at=LAUNCHED, heartbeat_at=beat, pid=42, host="h", attempt=1
    )


def check(found: JobRecord | None, after: float) -> tuple[str, str]:
    answer = liveness(found, LAUNCHED + timedelta(seconds=after), stale_seconds=90, start_seconds=600)
    return answer.state, answer.detail


def test_a_finished_job_is_finished_however_old_its_heartbeat():
    assert check(record("finished", LAUNCHED), 10_000)[0] == "finished"


def test_a_job_lives_while_its_heartbeat_is_fresh_and_dies_when_it_goes_stale():
    beat = LAUNCHED + timedelta(seconds=100)

    assert check(record(beat=beat), 100 + 90)[0] == "running"
    state, detail = check(record(beat=beat), 100 + 91)
    assert state == "dead"
    assert "process 42 on h" in detail and "no heartbeat for 91 s" in detail


def test_a_job_that_never_started_is_waited_for_until_the_start_deadline():
    assert check(record("launched"), 600)[0] == "running"
    state, detail = check(record("launched"), 601)
    assert state == "dead" and "did not start within 600 s" in detail


def test_a_job_without_a_row_is_dead():
    assert check(None, 0)[0] == "dead"
