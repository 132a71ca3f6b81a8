"""Route templates and timer schedules of the local host (pure unit tests)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from devhost.config import parse_timespan
from devhost.routes import compile_route, order_routes
from devhost.timer_scheduler import Schedule


def test_route_parameters_constraints_and_optional_segments():
    route = compile_route("", "runtime-cloud/runs/{id}/receipts/{kind?}", ["GET"], None)

    assert route.match("runtime-cloud/runs/r1/receipts/plan") == {"id": "r1", "kind": "plan"}
    assert route.match("/runtime-cloud/runs/r1/receipts") == {"id": "r1"}
    assert route.match("runtime-cloud/runs/r1/other") is None
    assert compile_route("api", "n/{n:int}", None, None).match("api/n/12") == {"n": "12"}
    assert compile_route("api", "n/{n:int}", None, None).match("api/n/x") is None


def test_literal_routes_win_over_parameters():
    general = compile_route("", "pools/{id}", ["GET"], "general")
    literal = compile_route("", "pools/summary", ["GET"], "literal")

    assert [r.target for r in order_routes([general, literal])] == ["literal", "general"]


def test_six_field_ncrontab_schedules():
    every_fifteen_minutes = Schedule("0 */15 * * * *")

    assert every_fifteen_minutes.next_after(datetime(2026, 1, 1, 0, 3, tzinfo=UTC)) == datetime(
        2026, 1, 1, 0, 15, tzinfo=UTC
    )


def test_time_span_schedules_are_refused_as_flex_consumption_refuses_them():
    with pytest.raises(ValueError, match="App Service plans"):
        Schedule("00:00:30")


@pytest.mark.parametrize("expression", ["*/5 * * * *", "not a schedule", "0 0 25 * * *", "00:00:00"])
def test_invalid_schedules_are_refused(expression):
    with pytest.raises(ValueError):
        Schedule(expression)


def test_host_json_time_spans():
    assert parse_timespan("00:00:02", 0) == 2
    assert parse_timespan("1.00:00:00", 0) == 86400
    assert parse_timespan(None, 7) == 7
    for bare in (2, 0.5, "2000"):  # Azure's TimeSpan.Parse reads a bare number as days: refused, never seconds
        with pytest.raises(ValueError, match="days"):
            parse_timespan(bare, 0)
