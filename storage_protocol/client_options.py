"""Transport options for every storage client, the app's (sync) and the local host's (async).

With environment settings on (the SDK's default), the transport looks up
proxies and ``~/.netrc`` from the environment on every request: measured here,
a measurable share of a storage call's CPU (about 0.45 ms per call on the
local host's event loop, some 40% of a queue send). The storage clients
authenticate with their own header (shared key or token), which a netrc entry
could only override, so the lookup is dropped, unless the environment names a
proxy: then the SDK's default stays, and with it the proxy.
"""

from __future__ import annotations

import os
from typing import Any

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


def proxy_configured() -> bool:
    """Whether the environment names a proxy (upper- or lower-case, as ``requests`` and aiohttp read them)."""
    return any(os.environ.get(name) or os.environ.get(name.lower()) for name in PROXY_VARIABLES)


def transport_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` plus ``use_env_settings=False`` unless a proxy is configured or the caller chose already."""
    if "use_env_settings" in options or "transport" in options:
        return options
    if proxy_configured():
        return options
    return {**options, "use_env_settings": False}


def client_options() -> dict[str, Any]:
    """Keyword arguments for ``...Client.from_connection_string`` when the caller has none of its own."""
    return transport_options({})
