"""The local host serves HTTP triggers the way the Functions host does."""

from __future__ import annotations

PROBLEM = "application/problem+json"


def test_route_parameters_query_headers_and_body_reach_a_sync_function(fixture_host):
    answer = fixture_host.request("POST", "echo/alice/3?verbose=1", data=b"hello", headers={"x-fixture": "yes"})

    assert answer.status_code == 200
    assert answer.headers["x-echo"] == "yes"
    assert answer.json() == {
        "method": "POST",
        "route_params": {"name": "alice", "count": "3"},
        "query": {"verbose": "1"},
        "body": "hello",
        "header": "yes",
    }


def test_an_optional_route_parameter_may_be_left_out(fixture_host):
    answer = fixture_host.request("GET", "echo/bob")

    assert answer.status_code == 200
    assert answer.json()["route_params"] == {"name": "bob"}


def test_a_route_constraint_that_does_not_match_is_not_found(fixture_host):
    answer = fixture_host.request("GET", "echo/bob/three")

    assert answer.status_code == 404
    assert answer.headers["Content-Type"].startswith(PROBLEM)


def test_async_functions_run_and_choose_their_status(fixture_host):
    answer = fixture_host.request("GET", "async-echo")

    assert answer.status_code == 201
    assert answer.json() == {"async": True}


def test_an_unknown_route_is_a_404_problem(fixture_host):
    answer = fixture_host.request("GET", "no/such/route")

    assert answer.status_code == 404
    assert answer.headers["Content-Type"].startswith(PROBLEM)
    assert answer.json()["status"] == 404


def test_a_wrong_method_is_a_405_problem_naming_the_allowed_ones(fixture_host):
    answer = fixture_host.request("DELETE", "echo/alice")

    assert answer.status_code == 405
    assert answer.headers["Allow"] == "GET, POST"
    assert answer.headers["Content-Type"].startswith(PROBLEM)


def test_a_function_that_raises_answers_500_without_its_internals(fixture_host):
    answer = fixture_host.request("GET", "explodes")

    assert answer.status_code == 500
    assert answer.headers["Content-Type"].startswith(PROBLEM)
    assert "secret internals" not in answer.text
    assert "Traceback" not in answer.text


def test_a_body_over_the_limit_is_a_413_problem(fixture_host):
    answer = fixture_host.request("POST", "echo/big", data=b"x" * (4 * 1024 * 1024 + 1))

    assert answer.status_code == 413
    assert answer.headers["Content-Type"].startswith(PROBLEM)


def test_the_admin_endpoint_refuses_unknown_functions(fixture_host):
    answer = fixture_host.request("POST", "admin/functions/no_such_function", json={})

    assert answer.status_code == 404
