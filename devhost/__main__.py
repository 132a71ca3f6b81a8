"""The local host's commands.

- ``python -m devhost up``: Azurite and the host together (``make run``).
- ``python -m devhost start``: the host alone, against the storage in the settings.
- ``python -m devhost token``: a bearer token the local host accepts.
- ``python -m devhost keys``: the host's master key (admin API) and Durable
  system key (Durable webhooks).
- ``python -m devhost validate``: index the app with the Azure Functions
  Python worker's own code and list what it accepts and refuses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path

from devhost.tokens import DEFAULT_AUDIENCE, DEFAULT_ISSUER, mint_token

# The ids the app logs as fields (``extra=``, see shared/platform/logs.py in the app). Application
# Insights keeps them as custom dimensions; here they follow the message.
LOG_FIELDS = ("tenant_id", "environment_id", "run_id", "lease_id")


class _FieldsFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:  # logging's name
        line = super().formatMessage(record)
        fields = " ".join(f"{name}={getattr(record, name)}" for name in LOG_FIELDS if hasattr(record, name))
        return f"{line} [{fields}]" if fields else line


def _local_values(app_dir: Path) -> dict[str, str]:
    """``local.settings.json`` Values under the environment (which wins), without changing the environment."""
    from devhost.config import local_settings_values

    return {**local_settings_values(app_dir), **os.environ}


def _start(args: argparse.Namespace) -> int:
    from devhost.extensions import default_extensions
    from devhost.host import LocalHost, serve

    handler = logging.StreamHandler()
    handler.setFormatter(_FieldsFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=os.environ.get("DEVHOST_LOG_LEVEL", "INFO"), handlers=[handler])
    logging.getLogger("azure").setLevel(logging.WARNING)
    host = LocalHost(
        Path(args.app_dir),
        port=args.port,
        bind=args.bind,
        extensions=default_extensions(),
        allow_remote=args.allow_remote,
    )
    return asyncio.run(serve(host))


def _up(args: argparse.Namespace) -> int:
    """Azurite on its standard ports with data under .data/azurite, then the host; Ctrl-C stops both."""
    from devhost.azurite import Azurite

    app_dir = Path(args.app_dir).resolve()
    # Traces, metrics and logs as OTLP JSON lines (docs/telemetry.md), unless a setting says otherwise.
    os.environ.setdefault("RuntimeCloud__Telemetry__LocalDirectory", str(app_dir / ".data" / "telemetry"))
    azurite = Azurite(app_dir / ".data" / "azurite", ports=(10000, 10001, 10002))
    try:
        azurite.start()
    except (TimeoutError, FileNotFoundError) as error:
        print(f"Azurite did not start: {error}", file=sys.stderr)
        azurite.stop()
        return 2
    print("Azurite: blob 10000, queue 10001, table 10002 (data in .data/azurite)", flush=True)
    try:
        return _start(args)
    finally:
        azurite.stop()


def _keys(args: argparse.Namespace) -> int:
    """Print the local host's keys (created if missing), as the portal's App keys page shows Azure's."""
    from devhost.host_keys import ensure_host_keys, key_directory

    print(json.dumps(ensure_host_keys(key_directory(Path(args.app_dir).resolve())).as_document(), indent=2))
    return 0


def _validate(args: argparse.Namespace) -> int:
    """Index the app as the worker does; exit 2 (naming each function and why) if it refuses any."""
    from devhost.config import apply_local_settings
    from devhost.worker_validation import WorkerRefusedApp, WorkerUnavailable, index_with_worker

    app_dir = Path(args.app_dir).resolve()
    apply_local_settings(app_dir)
    try:
        functions = index_with_worker(app_dir)
    except (WorkerRefusedApp, WorkerUnavailable) as error:
        print(error, file=sys.stderr)
        return 2
    for function in functions:
        print(function.get_function_name())
    print(f"the Azure Functions Python worker accepts all {len(functions)} functions", file=sys.stderr)
    return 0


def _token(args: argparse.Namespace) -> int:
    from devhost.token_check import TokenRefused, check_token

    values = _local_values(Path(args.app_dir))
    directory = args.key_dir or values.get("RuntimeCloud__Auth__LocalSigningKeyDirectory") or ".data/auth"
    key_dir = Path(args.app_dir) / directory if not os.path.isabs(directory) else Path(directory)
    token = mint_token(
        key_dir,
        tenant=args.tenant,
        scopes=args.scope,
        roles=args.role,
        client_id=args.client_id,
        object_id=args.object_id,
        issuer=values.get("RuntimeCloud__Auth__Issuer", DEFAULT_ISSUER),
        audience=values.get("RuntimeCloud__Auth__Audience", DEFAULT_AUDIENCE),
        tenant_claim=values.get("RuntimeCloud__Auth__TenantClaim", "tid"),
        lifetime_seconds=args.lifetime,
    )
    try:
        check_token(Path(args.app_dir), token, values, key_dir)
    except TokenRefused as refusal:  # no token printed: one the host refuses only wastes the caller's time
        print(f"devhost token: the host would refuse this token (401): {refusal}", file=sys.stderr)
        return 2
    print(token)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devhost", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="run the function app locally")
    start.add_argument("--app-dir", default=".")
    start.add_argument("--port", type=int, default=int(os.environ.get("DEVHOST_PORT", 8130)))
    start.add_argument("--bind", default="127.0.0.1")
    start.add_argument("--allow-remote", action="store_true", help="allow --bind beyond loopback")
    start.set_defaults(run=_start)
    up = commands.add_parser("up", help="start Azurite, then the host (what 'make run' does)")
    up.add_argument("--app-dir", default=".")
    up.add_argument("--port", type=int, default=int(os.environ.get("DEVHOST_PORT", 8130)))
    up.add_argument("--bind", default="127.0.0.1")
    up.add_argument("--allow-remote", action="store_true", help="allow --bind beyond loopback")
    up.set_defaults(run=_up)
    keys = commands.add_parser("keys", help="print the host's master and Durable system keys")
    keys.add_argument("--app-dir", default=".")
    keys.set_defaults(run=_keys)
    validate = commands.add_parser("validate", help="index and validate the app with the Python worker's own code")
    validate.add_argument("--app-dir", default=".")
    validate.set_defaults(run=_validate)
    token = commands.add_parser("token", help="print a bearer token the local host accepts")
    token.add_argument("--tenant", required=True)
    token.add_argument("--scope", action="append", default=[])
    token.add_argument("--role", action="append", default=[])
    token.add_argument("--client-id", default="local-developer")
    token.add_argument(
        "--object-id", default=None, help="oid: the person or service principal (default: the client id)"
    )
    token.add_argument("--lifetime", type=int, default=3600, help="seconds")
    token.add_argument("--app-dir", default=".")
    token.add_argument("--key-dir", default=None)
    token.set_defaults(run=_token)
    args = parser.parse_args(argv)
    from devhost.config import ConfigError

    try:
        return int(args.run(args))
    except ConfigError as error:  # a malformed host.json or local.settings.json: say which, no traceback
        print(error, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
