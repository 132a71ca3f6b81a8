"""The Runtime Cloud host's function app: build it, register the enabled modules."""

from __future__ import annotations

import azure.durable_functions as df
import azure.functions as func

from functions import blueprints_for
from shared.platform.http.endpoint import configure_authentication
from shared.platform.http.problems import register_problems
from shared.platform.storage.bootstrap import prepare_store
from shared.wiring.features import enabled_manifests
from shared.wiring.settings import get_settings
from shared.wiring.telemetry import configure_telemetry

settings = get_settings()  # invalid settings stop the host here, naming the setting
configure_telemetry(settings)  # OpenTelemetry: Application Insights, OTLP JSON lines locally, or off
configure_authentication(settings.runtime_cloud.auth)  # every HTTP function checks bearer tokens against it
prepare_store()
for manifest in enabled_manifests(settings.runtime_cloud.host.enabled_modules):
    if manifest.problems is not None:  # a feature's own refusals, answered so by every HTTP function
        register_problems(manifest.problems)

app = df.DFApp(http_auth_level=func.AuthLevel.ANONYMOUS)

for blueprint in blueprints_for(settings.runtime_cloud.host.enabled_modules):
    app.register_functions(blueprint)
