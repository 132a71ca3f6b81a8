"""An app the Azure Functions Python worker refuses, for the local host's validation.

Three functions make the mistakes this project once made (the worker would
refuse each, and with them the whole app); one is correct and must not be
named among the refused.
"""

from __future__ import annotations

from typing import Any

import azure.durable_functions as df
import azure.functions as func

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="returns-a-dict", methods=["GET"])
def returns_a_dict(req: func.HttpRequest) -> dict:
    return {"the worker": "accepts only HttpResponse or str"}


@app.route(route="unresolvable", methods=["GET"])
def unresolvable_annotation(req: func.HttpRequest) -> NotImportedHere:  # type: ignore[name-defined]  # noqa: F821
    return func.HttpResponse("never")


@app.activity_trigger(input_name="request", activity="parameterised_input")
def parameterised_input(request: dict[str, Any]) -> str:
    return "never"


@app.route(route="fine", methods=["GET"])
def a_fine_function(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("fine")
