"""The HTTP routes the app registers, read from the app itself (``function_app.app``).

Read in a child process, as the Functions host would load the app: importing
``function_app`` here would pin this process's settings to the app's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

from tests.conftest import REPO

_LIST_ROUTES = """
import json
import function_app
from shared.platform.http.openapi import function_name, http_functions, openapi_path, route_methods, route_of

routes = [{"function": function_name(function), "path": openapi_path(route_of(function, trigger)),
           "methods": route_methods(trigger)}
          for function, trigger in http_functions(function_app.app.get_functions())]
print(json.dumps(routes))
"""


@dataclass(frozen=True)
class RegisteredRoute:
    function: str
    method: str
    path: str  # as the OpenAPI document writes it: /runtime-cloud/runs/{id}

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


def registered_http_routes(settings: dict[str, str]) -> list[RegisteredRoute]:
    """Every (method, route) of every HTTP function the app registers with these settings."""
    result = subprocess.run(
        [sys.executable, "-c", _LIST_ROUTES],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **settings, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    listed = json.loads(result.stdout.strip().splitlines()[-1])
    return sorted(
        (RegisteredRoute(item["function"], method, item["path"]) for item in listed for method in item["methods"]),
        key=lambda route: route.key,
    )
