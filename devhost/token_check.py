"""``devhost token`` refuses what the host would refuse.

A minted token is checked by the app's own validator (``shared/platform/auth/tokens.py``: the lifetime over
``RuntimeCloud:Auth:MaxTokenLifetimeSeconds``, a tenant claim that is not a tenant id, a principal that
names one of the host's system actors, ...) with the app's ``RuntimeCloud:Auth`` settings, so the rules
are the app's and never a copy here. The app's modules are loaded from the app folder by path, as the
local host loads the app (devhost imports nothing of the app by name: pyproject.toml, import contracts).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

VALIDATOR = Path("shared", "platform", "auth", "tokens.py")
AUTH_PREFIX = "runtimecloud__auth__"  # app settings are matched without regard to case, as the host reads them


class TokenRefused(Exception):
    """The host would refuse this token (401): the reason is the one it would give."""


def check_token(app_dir: Path, token: str, values: Mapping[str, str], key_dir: Path) -> None:
    """Validate ``token`` as the app in ``app_dir`` would; :class:`TokenRefused` with its reason if not.

    An app without this product's validator (the tests' small apps) has no rules to check against."""
    if not (app_dir / VALIDATOR).is_file():
        return
    host_settings = _app_module(app_dir, "shared.platform.host_settings")
    tokens = _app_module(app_dir, "shared.platform.auth.tokens")
    signing_keys = _app_module(app_dir, "shared.platform.auth.signing_keys")
    errors = _app_module(app_dir, "shared.platform.errors")
    try:
        settings = host_settings.AuthSettings.model_validate(_auth_section(host_settings.AuthSettings, values, key_dir))
    except ValueError as error:  # pydantic's ValidationError: the host would not start with these settings
        raise TokenRefused(f"invalid RuntimeCloud:Auth settings: {' '.join(str(error).split())[:300]}") from None
    validator = tokens.TokenValidator(settings, signing_keys.LocalJwksSource(str(key_dir)))
    try:
        validator.validate(token)
    except errors.AuthenticationFailed as error:
        raise TokenRefused(str(error)) from None


def _auth_section(model: Any, values: Mapping[str, str], key_dir: Path) -> dict[str, str]:
    """The ``RuntimeCloud__Auth__*`` values by their setting names (``model``: the app's AuthSettings)."""
    aliases = {field.alias.lower(): field.alias for field in model.model_fields.values() if field.alias}
    section = {}
    for name, value in values.items():
        if name.lower().startswith(AUTH_PREFIX) and name[len(AUTH_PREFIX) :].lower() in aliases:
            section[aliases[name[len(AUTH_PREFIX) :].lower()]] = value
    # The token was signed with the local key: verify with it, whatever Authority or JwksUri says.
    section.pop("Authority", None)
    section.pop("JwksUri", None)
    section["LocalSigningKeyDirectory"] = str(key_dir)
    return section


def _app_module(app_dir: Path, name: str) -> ModuleType:
    folder = str(app_dir.resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)
