"""The request pipeline reads the models an endpoint declares and hands them to the handler.

``@endpoint(body=Model, query=Model)`` parses the JSON body and the query parameters once, after the
caller is authorised, with the answers a handler's own parse gave (415, 400, 422 naming each field by
its JSON pointer), and passes them as the handler's ``body`` and ``query``; a feature's own errors are
answered by the problem mapping it registers. Host-level answers are in tests/test_api_fuzz.py and each
feature's tests; these call the pipeline in-process with the SDK's own ``HttpRequest``.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import time
from collections.abc import Iterator

import azure.functions as func
import pytest
from pydantic import BaseModel, ConfigDict, Field

from shared.platform.auth.caller import Caller
from shared.platform.errors import RuntimeCloudError
from shared.platform.http import problems
from shared.platform.http.endpoint import endpoint, verified_tokens
from shared.platform.http.paging import PageQuery
from shared.platform.http.validation import caller_input
from shared.platform.storage.documents import read_stored

CALLER = Caller(client_id="client", tenant="tenant-a", scopes=frozenset({"w.write"}), roles=frozenset())
READER = Caller(client_id="client", tenant="tenant-a", scopes=frozenset({"w.read"}), roles=frozenset())


class Widget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    size: int = Field(default=1, ge=1)


class Note(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=10)


class WidgetQuery(PageQuery):
    colour: str | None = Field(default=None, min_length=1)


class WidgetMissing(RuntimeCloudError):
    pass


def _verified(caller: Caller, subject: str) -> str:
    """A token the pipeline has already verified (its cache of verified tokens): no signing keys needed."""
    claims = {"exp": time.time() + 600, "sub": subject}
    text = f"eyJhbGciOiJSUzI1NiJ9.{base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip('=')}.sig"
    verified_tokens.remember(text, caller)
    return text


@pytest.fixture
def token() -> Iterator[str]:
    yield _verified(CALLER, "writer")
    verified_tokens.clear()


def _request(token: str, body: bytes = b"", content_type: str = "application/json", **params: str) -> func.HttpRequest:
    return func.HttpRequest(
        method="PUT",
        url="http://localhost/widgets/w1",
        headers={"Authorization": f"Bearer {token}", "Content-Type": content_type},
        params=params,
        route_params={"id": "w1"},
        body=body,
    )


def _call(function: object, request: func.HttpRequest) -> tuple[int, dict[str, object]]:
    response = asyncio.run(function(req=request))  # type: ignore[operator]
    return response.status_code, json.loads(response.get_body() or b"null")


@endpoint(scopes=["w.write"], body=Widget, query=WidgetQuery, responses={200: Widget})
def put_widget(req: func.HttpRequest, caller: Caller, body: Widget, query: WidgetQuery) -> dict[str, object]:
    return {"name": body.name, "size": body.size, "colour": query.colour, "limit": query.limit, "by": caller.tenant}


@endpoint(scopes=["w.write"], body=Note, body_required=False, responses={200: Note})
async def note(req: func.HttpRequest, body: Note) -> Note:
    return body


def test_the_handler_gets_the_parsed_body_and_query(token):
    status, answer = _call(put_widget, _request(token, b'{"name": "w", "size": 3}', colour="red", other="x"))
    assert status == 200
    assert answer == {"name": "w", "size": 3, "colour": "red", "limit": 50, "by": "tenant-a"}


def test_an_invalid_body_or_query_is_the_problem_a_handler_parse_gave(token):
    status, answer = _call(put_widget, _request(token, b'{"name": "", "size": 0, "extra": 1}'))
    assert status == 422
    assert [error["path"] for error in answer["errors"]] == ["/name", "/size", "/extra"]  # type: ignore[union-attr]

    status, answer = _call(put_widget, _request(token, b'{"name": "w"}', limit="0", colour=""))
    assert status == 422
    assert sorted(error["path"] for error in answer["errors"]) == ["/colour", "/limit"]  # type: ignore[union-attr]

    assert (
        _call(
            put_widget,
            _request(
                token,
                b"{",
            ),
        )[0]
        == 400
    )
    assert _call(put_widget, _request(token, b""))[0] == 422  # a required body
    assert _call(put_widget, _request(token, b'{"name": "w"}', content_type="text/plain"))[0] == 415


def test_an_optional_body_left_out_is_the_models_defaults(token):
    assert _call(note, _request(token)) == (200, {"reason": ""})
    assert _call(note, _request(token, b'{"reason": "because"}')) == (200, {"reason": "because"})
    assert _call(note, _request(token, b'{"reason": "far too long"}'))[0] == 422


def test_nothing_is_parsed_for_a_caller_who_may_not_call(token):
    reader = _verified(READER, "reader")
    assert _call(put_widget, _request(reader, b"{"))[0] == 403  # not the 400 of the unreadable body


def test_the_worker_sees_only_the_bindings():
    assert list(inspect.signature(put_widget).parameters) == ["req"]


def test_a_handler_cannot_take_a_model_its_endpoint_does_not_declare():
    with pytest.raises(TypeError, match="declares no body= model"):

        @endpoint(scopes=["w.write"])
        def undeclared(req: func.HttpRequest, body: Widget) -> None: ...


def test_a_registered_feature_mapping_answers_its_errors(token):
    @endpoint(scopes=["w.write"])
    def get_widget(req: func.HttpRequest) -> None:
        raise WidgetMissing("no widget w1")

    mapping = problems.ProblemMapping()

    @mapping.answers(WidgetMissing)
    def _missing(error: WidgetMissing) -> problems.Problem:
        return problems.Problem(404, "no-widget", "No widget", str(error))

    assert _call(get_widget, _request(token))[0] == 500  # unmapped: an unhandled error
    problems.register_problems(mapping)
    status, answer = _call(get_widget, _request(token))
    assert (status, answer["type"], answer["detail"]) == (404, "urn:runtime-cloud:problem:no-widget", "no widget w1")


# -- a ValidationError is the caller's 422 only when it is about the caller's input --------------------------

SECRET_ISH = "s3cr3t-row-value"


def _assert_names_nothing(answer: dict[str, object]) -> None:
    """The generic server error: no field, no pydantic text, nothing of the document that did not read."""
    assert answer["type"] == "urn:runtime-cloud:problem:internal-error" and answer["status"] == 500
    assert "errors" not in answer
    text = json.dumps(answer)
    for leak in (SECRET_ISH, "Widget", "size", "validation", "pydantic", "RowKey"):
        assert leak not in text, (leak, text)


def test_a_model_the_server_cannot_build_or_read_is_a_500_that_names_nothing(token, caplog):
    @endpoint(scopes=["w.write"])
    def get_widget(req: func.HttpRequest) -> Widget:
        return Widget.model_validate({"name": SECRET_ISH, "size": "many"})  # as a stored row that no longer reads

    @endpoint(scopes=["w.write"])
    def list_widgets(req: func.HttpRequest) -> Widget:
        return read_stored(Widget, f'{{"name": "{SECRET_ISH}", "size": 0}}', table="Widgets", partition="p", row="w1")

    with caplog.at_level("ERROR", logger="runtime_cloud.http"):
        status, answer = _call(get_widget, _request(token))
        assert status == 500
        _assert_names_nothing(answer)
        status, answer = _call(list_widgets, _request(token))
        assert status == 500
        _assert_names_nothing(answer)
    logged = caplog.text
    # The log finds the model, the field and the row, and quotes no value of it.
    assert "Widget" in logged and "size: int_parsing" in logged and "size: greater_than_equal" in logged
    assert "table Widgets, PartitionKey 'p', RowKey 'w1'" in logged
    assert SECRET_ISH not in logged
    assert str(answer["detail"]).rsplit(" ", 1)[-1] in logged  # the reference the caller was given


def test_input_a_handler_reads_itself_is_still_the_callers_422(token):
    @endpoint(scopes=["w.write"])
    def put_widget_spec(req: func.HttpRequest) -> Widget:
        document = json.loads(req.get_body())
        with caller_input(document["spec"], prefix="/spec"):
            return Widget.model_validate(document["spec"])

    status, answer = _call(put_widget_spec, _request(token, b'{"spec": {"name": "", "size": 0}}'))
    assert status == 422 and answer["type"] == "urn:runtime-cloud:problem:validation-failed"
    assert [error["path"] for error in answer["errors"]] == ["/spec/name", "/spec/size"]  # type: ignore[union-attr]
    assert _call(put_widget_spec, _request(token, b'{"spec": {"name": "w"}}')) == (200, {"name": "w", "size": 1})


def test_an_optional_body_left_out_that_the_model_cannot_default_is_the_callers_422(token):
    @endpoint(scopes=["w.write"], body=Widget, body_required=False, responses={200: Widget})
    def maybe_widget(req: func.HttpRequest, body: Widget) -> Widget:
        return body

    status, answer = _call(maybe_widget, _request(token))
    assert status == 422 and [error["path"] for error in answer["errors"]] == ["/name"]  # type: ignore[union-attr]
