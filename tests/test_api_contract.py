"""Issue 11: the API's OpenAPI 3.1 document, generated from the models the handlers validate with.

The route test reads the routes from the app itself, so a route added without
a documented contract (``responses=`` in its ``@endpoint``) fails here.
"""

from __future__ import annotations

from typing import Any

import azure.durable_functions as df
import azure.functions as func
import pytest
import schemathesis
from pydantic import BaseModel, ConfigDict, Field

from shared.platform.http.endpoint import endpoint
from shared.platform.http.openapi import build_document
from tests.conftest import app_settings
from tests.support.app_routes import RegisteredRoute, registered_http_routes

DOCUMENT = "runtime-cloud/openapi.json"
PROBLEM = "application/problem+json"
COMPONENTS = "#/components/schemas/"


@pytest.fixture(scope="module")
def app_routes(azurite, key_dir) -> list[RegisteredRoute]:
    return registered_http_routes(app_settings(azurite, key_dir))


@pytest.fixture(scope="module")
def document(runtime_host, mint) -> dict[str, Any]:
    answer = runtime_host.request("GET", DOCUMENT, token=mint("tenant-a", scopes=["factory.meta.read"]))
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"].startswith("application/json")
    return answer.json()


def test_every_route_the_app_registers_is_in_the_document(app_routes, document):
    documented = {f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item}

    missing = [f"{route.key} ({route.function})" for route in app_routes if route.key not in documented]

    assert len(app_routes) > 30
    assert not missing, (
        "routes without a documented contract; give their @endpoint(...) responses=, and body=, "
        f"query=, path= as they read them: {missing}"
    )


def test_the_document_is_valid_openapi_3_1(document):
    schemathesis.openapi.from_dict(document).validate()

    assert document["openapi"].startswith("3.1")


def test_bodies_and_answers_are_the_handlers_models(document):
    lease = document["paths"]["/runtime-cloud/leases"]["post"]
    schemas = document["components"]["schemas"]

    assert lease["requestBody"]["content"]["application/json"]["schema"] == {"$ref": f"{COMPONENTS}AcquireRequest"}
    assert schemas["AcquireRequest"]["additionalProperties"] is False  # the model forbids unknown fields
    assert lease["responses"]["201"]["content"]["application/json"]["schema"] == {"$ref": f"{COMPONENTS}LeaseView"}
    assert lease["security"] == [{"bearer": ["factory.capacity.lease"]}]
    assert lease["responses"]["429"]["content"][PROBLEM]["schema"] == {"$ref": f"{COMPONENTS}ProblemDocument"}
    assert "Retry-After" in lease["responses"]["429"]["headers"]
    errors = schemas["ProblemDocument"]["properties"]["errors"]
    assert errors["anyOf"][0]["items"] == {"$ref": f"{COMPONENTS}FieldProblem"}


def test_path_parameters_carry_the_patterns_the_handlers_enforce(document):
    pool = document["paths"]["/runtime-cloud/pools/{id}"]["put"]
    [parameter] = [p for p in pool["parameters"] if p["in"] == "path"]

    assert parameter["schema"]["pattern"] == "^[a-z0-9][a-z0-9-]{0,62}$"
    assert "PlatformAdmin" in pool["description"]
    assert {"403", "404", "422"} <= set(pool["responses"])


def test_the_document_needs_a_read_scope(runtime_host, mint):
    anonymous = runtime_host.request("GET", DOCUMENT)
    health_only = runtime_host.request("GET", DOCUMENT, token=mint("tenant-a", scopes=["factory.health.read"]))
    runtime_reader = runtime_host.request("GET", DOCUMENT, token=mint("tenant-a", scopes=["factory.runtime.read"]))

    assert anonymous.status_code == 401 and anonymous.headers["Content-Type"].startswith(PROBLEM)
    assert health_only.status_code == 403 and health_only.headers["Content-Type"].startswith(PROBLEM)
    assert runtime_reader.status_code == 200


# -- the generator, on an app of the test's own --------------------------------------------------------


class Widget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    size: int = Field(default=1, ge=1)


class WidgetQuery(BaseModel):
    colour: str | None = Field(default=None, description="only widgets of this colour")
    limit: int = Field(default=10, ge=1, le=100)


def _small_app() -> func.FunctionApp:
    bp = df.Blueprint(http_auth_level=func.AuthLevel.ANONYMOUS)

    @bp.route(route="widgets/{id}", methods=["PUT"])
    @endpoint(
        scopes=["w.write"],
        roles=["Admin"],
        path={"id": r"[a-z]+"},
        body=Widget,
        responses={200: Widget, 201: Widget},
        problems=(409,),
    )
    def put_widget(req: func.HttpRequest) -> func.HttpResponse:
        """Create or replace a widget."""
        raise NotImplementedError

    @bp.route(route="widgets", methods=["GET"])
    @endpoint(any_scopes=["w.read", "w.write"], query=WidgetQuery, responses={200: Widget})
    def list_widgets(req: func.HttpRequest) -> func.HttpResponse:
        raise NotImplementedError

    @bp.route(route="widgets/search", methods=["GET"])
    @endpoint(scopes=["w.read"], query=WidgetQuery, responses={200: Widget})
    def search_widgets(req: func.HttpRequest) -> func.HttpResponse:
        raise NotImplementedError

    @bp.route(route="undocumented", methods=["GET"])
    @endpoint(scopes=["w.read"])
    def undocumented(req: func.HttpRequest) -> func.HttpResponse:
        raise NotImplementedError

    app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
    app.register_functions(bp)
    return app


def test_the_generator_documents_each_contract_and_leaves_out_a_route_without_one():
    document = build_document(_small_app().get_functions(), "widgets", "1")
    put = document["paths"]["/widgets/{id}"]["put"]
    listed = document["paths"]["/widgets"]["get"]

    assert "/undocumented" not in document["paths"]
    assert put["summary"] == "Create or replace a widget."
    assert put["parameters"] == [
        {"name": "id", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^(?:[a-z]+)$"}}
    ]
    assert put["requestBody"]["required"] is True
    assert sorted(put["responses"]) == [
        "200",
        "201",
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "415",
        "422",
        "431",
        "500",
        "503",
    ]
    assert put["security"] == [{"bearer": ["w.write"]}]
    assert listed["security"] == [{"bearer": ["w.read"]}, {"bearer": ["w.write"]}]
    colour = next(p for p in listed["parameters"] if p["name"] == "colour")
    assert colour["schema"]["type"] == "string" and "anyOf" not in colour["schema"]  # null cannot be sent
    assert next(p for p in listed["parameters"] if p["name"] == "limit")["schema"]["maximum"] == 100
    assert document["paths"]["/widgets/search"]["get"]["parameters"] == listed["parameters"]  # a shared query model
    assert document["components"]["schemas"]["Widget"]["additionalProperties"] is False
    schemathesis.openapi.from_dict(document).validate()


def test_timestamps_counts_and_alternatives_are_stated(document):
    schemas = document["components"]["schemas"]
    run = schemas["RunView"]["properties"]
    counts = next(option for option in run["plan_counts"]["anyOf"] if option.get("type") == "object")
    lease = schemas["LeaseView"]["properties"]
    accept = schemas["AcceptBody"]

    assert run["created_at"]["format"] == "date-time"
    assert lease["granted_at"]["format"] == "date-time"
    assert {"format": "date-time", "type": "string"} in lease["ended_at"]["anyOf"]
    assert set(counts["required"]) == {"create", "update", "delete", "no-change", "replace"}
    assert counts["additionalProperties"] is False
    # Each alternative a whole object (the fields it may come with), so that a generated client has a type for it.
    assert [branch["required"] for branch in accept["oneOf"]] == [["option"], ["decisions"]]
    assert all(branch["additionalProperties"] is False for branch in accept["oneOf"])
    assert set(accept["oneOf"][0]["properties"]) == {"option", "reason", "expires_at"}
    assert len(schemas["Declaration"]["oneOf"]) == 4


def test_lists_document_their_paging(document):
    runs = document["paths"]["/runtime-cloud/runs"]["get"]
    parameters = {p["name"]: p["schema"] for p in runs["parameters"]}

    assert parameters["limit"]["maximum"] == 200 and parameters["limit"]["minimum"] == 1
    assert parameters["continuation"]["minLength"] == 1
    assert parameters["environment"]["pattern"]
    assert "continuation" in document["components"]["schemas"]["RunList"]["required"]
