"""Webhook secrets by reference: an app setting of this installation, or a Key Vault secret.

A binding (or the installation's default, ``RuntimeCloud:GitOps:WebhookSecret``)
names where its webhook secret is, never the secret itself, so the secret is in
no table row, response or log. Two kinds of reference:

- an app setting whose name starts with ``RuntimeCloudGitOps__`` (in Azure it
  may hold ``@Microsoft.KeyVault(SecretUri=...)``, which the platform resolves;
  a reference it could not resolve is read as unset, never as the key:
  :mod:`shared.platform.secret_settings`).
  The prefix keeps a binding from naming any other setting of the host, whose
  value could be known (a schedule, a topology) and so forge signatures;
- a Key Vault secret URI (``https://<vault>.vault.azure.net/secrets/<name>``),
  read with the host's identity (locally from ``RuntimeCloud:Secrets:LocalValues``).

Values are read when a delivery arrives (so a rotation needs no restart); Key
Vault values are kept in memory for :data:`KEY_VAULT_CACHE_SECONDS`, so a burst
of deliveries costs one Key Vault read.
"""

from __future__ import annotations

import re
import threading
import time

from shared.platform.errors import RuntimeCloudError
from shared.platform.secret_settings import SecretSetting, read_secret_setting

APP_SETTING_PREFIX = "RuntimeCloudGitOps__"
APP_SETTING = re.compile(r"^RuntimeCloudGitOps__[A-Za-z0-9_]{1,100}$")
KEY_VAULT_SECRET = re.compile(r"^https://[a-z0-9-]+\.vault\.azure\.net/secrets/[A-Za-z0-9-]+(/[A-Za-z0-9]+)?$")
REFERENCE_PATTERN = f"^(?:{APP_SETTING.pattern[1:-1]}|{KEY_VAULT_SECRET.pattern[1:-1]})$"
KEY_VAULT_CACHE_SECONDS = 300.0
MIN_SECRET_CHARS = 16  # a shorter secret is guessable; treated as no secret at all


class SecretUnavailable(RuntimeCloudError):
    """The reference resolves to nothing usable (unset, empty, too short, or Key Vault refused)."""


def check_reference(reference: str) -> str:
    """``reference`` if it is an app setting name with the prefix or a Key Vault secret URI; else ValueError."""
    if APP_SETTING.fullmatch(reference) or KEY_VAULT_SECRET.fullmatch(reference):
        return reference
    raise ValueError(
        f"a webhook secret reference is an app setting named {APP_SETTING_PREFIX}... "
        "or a Key Vault secret URI (https://<vault>.vault.azure.net/secrets/<name>)"
    )


_cache: dict[str, tuple[float, str]] = {}
_lock = threading.Lock()


def resolve(reference: str) -> bytes:
    """The secret's value as bytes (the HMAC key); :class:`SecretUnavailable` when there is none."""
    if APP_SETTING.fullmatch(reference):
        setting = read_secret_setting(reference)
        if setting.unresolved:
            raise SecretUnavailable(f"webhook secret {reference}: {setting.problem}")
        value = setting.value
    else:
        value = _key_vault(reference)
    if value is None or len(value) < MIN_SECRET_CHARS:
        raise SecretUnavailable(f"webhook secret {reference} is not set (or shorter than {MIN_SECRET_CHARS})")
    return value.encode("utf-8")


def app_setting_status(reference: str) -> SecretSetting | None:
    """What health shows of a reference to an app setting (None: a Key Vault URI, read on delivery)."""
    return read_secret_setting(reference) if APP_SETTING.fullmatch(reference) else None


def _key_vault(uri: str) -> str | None:
    with _lock:
        cached = _cache.get(uri)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
    from shared.desired_state.api import SecretReference
    from shared.provisioning.api import SecretUnresolvable, resolve_secrets

    try:
        value = resolve_secrets([SecretReference(name="webhook", uri=uri)])["webhook"]
    except SecretUnresolvable:
        return None
    with _lock:
        _cache[uri] = (time.monotonic() + KEY_VAULT_CACHE_SECONDS, value)
    return value
