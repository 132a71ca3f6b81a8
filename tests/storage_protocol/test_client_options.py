"""The task hub's storage clients skip the per-call proxy and netrc lookup only when no proxy is configured."""

from __future__ import annotations

import pytest

from devhost.durable.clients import client_options


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def test_without_a_proxy_the_clients_do_not_read_the_environment_on_every_call() -> None:
    assert client_options() == {"use_env_settings": False}


@pytest.mark.parametrize("name", ["HTTPS_PROXY", "http_proxy", "ALL_PROXY", "no_proxy"])
def test_a_configured_proxy_keeps_the_sdks_default_so_the_proxy_is_used(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(name, "http://proxy.example:3128")
    assert client_options() == {}
