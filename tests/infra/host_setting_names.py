"""The app setting names the host reads, derived from its settings model (shared/wiring/settings.py).

So the infra tests follow the host: a setting added to the model is known here at
once, and a name the program writes that the model does not read (a typo the host
would silently ignore) fails.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from pydantic import BaseModel

from shared.gitops.settings import DEFAULT_WEBHOOK_SECRET
from shared.platform.settings_section import Section
from shared.wiring.settings import Settings

# Identity-based store settings, read by shared.platform.storage.connection (not by the model): the host's
# store and the backup location (RuntimeCloud__Backup__Connection names RuntimeCloudBackup in Azure).
STORE_SETTINGS = tuple(
    f"{connection}__{name}"
    for connection in ("AzureWebJobsStorage", "RuntimeCloudBackup")
    for name in (
        "accountName",
        "blobServiceUri",
        "queueServiceUri",
        "tableServiceUri",
        "endpointSuffix",
        "credential",
        "clientId",
    )
)


# App settings a setting of the model names by default (their value is read by reference, not by the
# model): the GitOps webhooks' default secret, a Key Vault reference in Azure (infra: host_settings.py).
REFERENCED_SETTINGS = (DEFAULT_WEBHOOK_SECRET,)

HOST_JSON = Path(__file__).resolve().parents[2] / "host.json"


@functools.lru_cache(maxsize=1)
def app_setting_names() -> frozenset[str]:
    names: set[str] = set(STORE_SETTINGS) | set(REFERENCED_SETTINGS) | host_json_references()
    _walk(Settings, "", names)
    return frozenset(names)


def host_json_references() -> set[str]:
    """App settings host.json names as ``%Section:Key%`` (the Functions host resolves them itself)."""
    text = HOST_JSON.read_text(encoding="utf-8")
    return {reference.replace(":", "__") for reference in re.findall(r"%([^%]+)%", text)}


def _walk(model: type[BaseModel], prefix: str, names: set[str]) -> None:
    for field_name, field in model.model_fields.items():
        name = f"{prefix}{field.alias or field_name}"
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, Section):
            _walk(annotation, f"{name}__", names)
        else:
            names.add(name)


def is_host_setting(name: str, known: frozenset[str]) -> bool:
    """Matched case-insensitively, as the Functions host and pydantic-settings match them."""
    return name.lower() in {known_name.lower() for known_name in known}
