"""``runtime-cloud``: the operator CLI's root command, its global options and its command groups.

Exit codes (docs/cli.md; runtime_cloud_cli/exit_codes.py): 0 ok; 1 the answer is "no" (a run
ended other than applied, receipts that do not verify, a denied dry run, unhealthy backups); 2 usage or
invalid input (400, 422); 3 not found; 4 refused (403, 409); 5 authentication (no token, 401); 6 the host
unavailable (unreachable, 5xx, 429).
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from runtime_cloud_cli import auth
from runtime_cloud_cli.client import Api, ApiError
from runtime_cloud_cli.commands import capacity, environments, gitops, host, policy, proposals, runs
from runtime_cloud_cli.context import State
from runtime_cloud_cli.output import Output

DEFAULT_URL = "http://127.0.0.1:8130"


app = typer.Typer(
    name="runtime-cloud",
    help="Operate a Runtime Cloud host through its HTTP API: runs, receipts, environments, drift proposals, "
    "capacity, GitOps, policy and backups.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def root(
    ctx: typer.Context,
    url: Annotated[str, typer.Option(envvar="RUNTIME_CLOUD_URL", help="the host's base URL")] = DEFAULT_URL,
    token: Annotated[
        str | None, typer.Option(envvar="RUNTIME_CLOUD_TOKEN", show_envvar=True, help="a bearer token")
    ] = None,
    token_file: Annotated[
        Path | None, typer.Option(envvar="RUNTIME_CLOUD_TOKEN_FILE", help="a file holding a bearer token")
    ] = None,
    azure_scope: Annotated[
        str | None,
        typer.Option(
            envvar="RUNTIME_CLOUD_AZURE_SCOPE",
            help="a deployment's API scope (e.g. api://runtime-cloud/.default): a token from DefaultAzureCredential",
        ),
    ] = None,
    local_issuer: Annotated[
        bool, typer.Option("--local-issuer", help="mint a token with the local host's development issuer")
    ] = False,
    tenant: Annotated[str | None, typer.Option(help="--local-issuer: the token's tenant")] = None,
    scope: Annotated[
        list[str] | None, typer.Option(help="--local-issuer: a scope (repeat it; default: every API scope)")
    ] = None,
    role: Annotated[list[str] | None, typer.Option(help="--local-issuer: a role (repeat it)")] = None,
    principal: Annotated[str | None, typer.Option(help="--local-issuer: who acts (the token's oid)")] = None,
    client_id: Annotated[str, typer.Option(help="--local-issuer: the client application")] = "runtime-cloud-cli",
    app_dir: Annotated[
        Path, typer.Option(envvar="RUNTIME_CLOUD_APP_DIR", help="--local-issuer: the local host's app folder")
    ] = Path(),
    as_json: Annotated[bool, typer.Option("--json", help="print JSON for scripts instead of tables")] = False,
    timeout: Annotated[float, typer.Option(min=1, help="seconds to wait for each answer")] = 30.0,
) -> None:
    if local_issuer and not tenant:
        raise typer.BadParameter("--local-issuer needs --tenant", param_hint="--tenant")
    if not local_issuer and (tenant or scope or role or principal):
        raise typer.BadParameter("--tenant, --scope, --role and --principal go with --local-issuer")
    if local_issuer:
        issuer = auth.LocalIssuer(
            tenant=str(tenant),
            principal=principal,
            client_id=client_id,
            scopes=tuple(scope or ()),
            roles=tuple(role or ()),
            app_dir=app_dir.resolve(),
        )
        source = issuer.token
    elif token_file is not None:
        source = partial(auth.file_token, token_file)
    elif token:
        source = partial(str, token)
    elif azure_scope:
        source = partial(auth.default_azure_token, azure_scope)
    else:
        source = auth.no_token
    api = Api(url, source, timeout=timeout)
    ctx.call_on_close(api.close)
    ctx.obj = State(api=api, out=Output(as_json))


app.command(rich_help_panel="Runs")(runs.declare)
app.add_typer(runs.app, name="runs", rich_help_panel="Runs")
app.add_typer(environments.receipts, name="receipts", rich_help_panel="Runs")
app.add_typer(environments.envs, name="envs", rich_help_panel="Environments")
app.add_typer(proposals.app, name="proposals", rich_help_panel="Environments")
app.add_typer(gitops.app, name="gitops", rich_help_panel="Environments")
app.add_typer(policy.app, name="policy", rich_help_panel="Environments")
app.add_typer(capacity.leases, name="leases", rich_help_panel="Capacity")
app.add_typer(capacity.pools, name="pools", rich_help_panel="Capacity")
app.add_typer(capacity.quotas, name="quotas", rich_help_panel="Capacity")
app.add_typer(capacity.editions, name="editions", rich_help_panel="Capacity")
app.command(rich_help_panel="Host")(host.health)
app.add_typer(host.backup, name="backup", rich_help_panel="Host")


def main() -> None:
    """The console script ``runtime-cloud`` (pyproject.toml, [project.scripts]): an :class:`ApiError` is one
    line on stderr and its exit code, never a traceback."""
    try:
        app(prog_name="runtime-cloud")
    except ApiError as error:
        Output(as_json=False).error(str(error))
        sys.exit(int(error.exit_code))
