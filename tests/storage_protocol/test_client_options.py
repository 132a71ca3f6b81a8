"""Storage clients (the app's and the task hub's) skip the per-call proxy and netrc lookup unless a proxy is set."""

from __future__ import annotations

import pytest

from storage_protocol.client_options import PROXY_VARIABLES, client_options, transport_options


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
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


def test_a_callers_own_transport_choice_is_kept_as_given() -> None:
    assert transport_options({"use_env_settings": True}) == {"use_env_settings": True}
    transport = object()
    assert transport_options({"transport": transport}) == {"transport": transport}
    assert transport_options({"retry_total": 0}) == {"retry_total": 0, "use_env_settings": False}
