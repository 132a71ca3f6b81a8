"""``runtime-cloud leases|pools|quotas|editions``: capacity as the API offers it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from runtime_cloud_cli.client import ApiError
from runtime_cloud_cli.context import state
from runtime_cloud_cli.exit_codes import Exit
from runtime_cloud_cli.output import Column

leases = typer.Typer(help="Capacity leases: acquire, renew, release, list.", no_args_is_help=True)
pools = typer.Typer(help="Capacity pools: list, show, set (create or resize), drain.", no_args_is_help=True)
quotas = typer.Typer(help="Quotas: your edition and its limits, a tenant's usage.", no_args_is_help=True)
editions = typer.Typer(
    help="Editions: the concurrent-lease limits per pool kind; set one (PlatformAdmin).", no_args_is_help=True
)

LeaseId = Annotated[str, typer.Argument(help="the lease id")]
PoolId = Annotated[str, typer.Argument(help="the pool id")]
LEASE_COLUMNS: list[Column] = [
    ("lease", "lease_id"),
    ("pool", "pool"),
    ("slot", "slot"),
    ("holder", "holder"),
    ("state", "state"),
    ("expires", "expires_at"),
]
POOL_COLUMNS: list[Column] = [
    ("pool", "id"),
    ("kind", "kind"),
    ("region", "region"),
    ("scope", "scope"),
    ("size", "size"),
    ("held", "held"),
    ("free", "free"),
    ("draining", "draining"),
]


# -- leases ------------------------------------------------------------------------------------------


@leases.command()
def acquire(
    ctx: typer.Context,
    kind: Annotated[str, typer.Option(help="agent-runtime, sandbox, build or browser")],
    holder: Annotated[str, typer.Option(help="who holds it (a worker's name)")],
    ttl: Annotated[int, typer.Option(min=1, help="seconds until it expires unless renewed")],
    purpose: Annotated[str, typer.Option(help="attempt, sandbox, build or browser")] = "attempt",
    region: Annotated[str | None, typer.Option(help="only a pool in this region")] = None,
    lease_id: Annotated[str | None, typer.Option(help="your own id: a retry returns the same lease")] = None,
) -> None:
    """Acquire a slot (scope factory.capacity.lease)."""
    s = state(ctx)
    body = {"kind": kind, "holder": holder, "ttl_seconds": ttl, "purpose": purpose}
    body.update({k: v for k, v in {"region": region, "lease_id": lease_id}.items() if v is not None})
    s.out.document(s.api.call("POST", "leases", body=body))


@leases.command()
def renew(
    ctx: typer.Context,
    lease_id: LeaseId,
    ttl: Annotated[int | None, typer.Option(min=1, help="a new lifetime in seconds (default: the lease's)")] = None,
) -> None:
    """Renew a lease before it expires (409 lease-lost: stop the work)."""
    s = state(ctx)
    body = {"ttl_seconds": ttl} if ttl is not None else None
    s.out.document(s.api.call("POST", f"leases/{lease_id}/renew", body=body))


@leases.command()
def release(ctx: typer.Context, lease_id: LeaseId) -> None:
    """Release a lease (repeating it is harmless)."""
    s = state(ctx)
    s.api.call("DELETE", f"leases/{lease_id}")
    s.out.document({"lease_id": lease_id, "released": True})


@leases.command("show")
def show_lease(ctx: typer.Context, lease_id: LeaseId) -> None:
    """One lease."""
    s = state(ctx)
    s.out.document(s.api.call("GET", f"leases/{lease_id}"))


@leases.command("list")
def list_leases(
    ctx: typer.Context,
    pool: Annotated[str | None, typer.Option(help="only this pool's leases")] = None,
    holder: Annotated[str | None, typer.Option(help="only this holder's leases")] = None,
    lease_state: Annotated[str | None, typer.Option("--state", help="active, released or expired")] = None,
    limit: Annotated[int | None, typer.Option(help="page size the host is asked for (every page is read)")] = None,
) -> None:
    """The tenant's leases."""
    s = state(ctx)
    params = {"pool": pool, "holder": holder, "state": lease_state, "limit": limit}
    s.out.items(list(s.api.pages("leases", "leases", params)), LEASE_COLUMNS)


# -- pools -------------------------------------------------------------------------------------------


@pools.command("list")
def list_pools(ctx: typer.Context) -> None:
    """The pools you may lease from (a PlatformAdmin sees every pool)."""
    s = state(ctx)
    s.out.items(list(s.api.pages("pools", "pools")), POOL_COLUMNS)


@pools.command("show")
def show_pool(ctx: typer.Context, pool_id: PoolId) -> None:
    """One pool: size, bounds, held and free slots, recent denials."""
    s = state(ctx)
    s.out.document(s.api.call("GET", f"pools/{pool_id}"))


@pools.command("set")
def set_pool(
    ctx: typer.Context,
    pool_id: PoolId,
    kind: Annotated[str, typer.Option(help="agent-runtime, sandbox, build or browser")],
    size: Annotated[int, typer.Option(min=0, help="slots")],
    minimum: Annotated[int | None, typer.Option("--min", min=0, help="smallest size")] = None,
    maximum: Annotated[int | None, typer.Option("--max", min=0, help="largest size")] = None,
    region: Annotated[str | None, typer.Option(help="the pool's region")] = None,
    scope: Annotated[str | None, typer.Option(help="shared or dedicated")] = None,
    tenant: Annotated[str | None, typer.Option(help="a dedicated pool's tenant")] = None,
    draining: Annotated[bool | None, typer.Option("--draining/--open", help="drain it, or re-open it")] = None,
) -> None:
    """Create a pool or resize it (PUT /pools/{id}; role PlatformAdmin). Unset options are not sent."""
    s = state(ctx)
    fields: dict[str, Any] = {
        "min": minimum,
        "max": maximum,
        "region": region,
        "scope": scope,
        "tenant": tenant,
        "draining": draining,
    }
    body = {"kind": kind, "size": size, **{k: v for k, v in fields.items() if v is not None}}
    s.out.document(s.api.call("PUT", f"pools/{pool_id}", body=body))


@pools.command()
def drain(ctx: typer.Context, pool_id: PoolId) -> None:
    """Drain a pool: no new leases; held ones run to their end (role PlatformAdmin)."""
    s = state(ctx)
    s.out.document(s.api.call("POST", f"pools/{pool_id}/drain"))


# -- quotas and editions -------------------------------------------------------------------------------


@quotas.command("show")
def show_quotas(ctx: typer.Context) -> None:
    """Your edition, the default edition, and every edition's limits."""
    s = state(ctx)
    s.out.document(s.api.call("GET", "quotas"))


@quotas.command()
def usage(
    ctx: typer.Context, tenant: Annotated[str, typer.Argument(help="the tenant (yours, or any as admin)")]
) -> None:
    """A tenant's leases in use per kind against its edition's limits."""
    s = state(ctx)
    s.out.document(s.api.call("GET", f"tenants/{tenant}/usage"))


@editions.command("list")
def list_editions(ctx: typer.Context) -> None:
    """Every edition and its limits (with its tenants, for a PlatformAdmin)."""
    s = state(ctx)
    columns: list[Column] = [("edition", "edition"), ("limits", "limits"), ("tenants", "tenants")]
    s.out.items(s.api.call("GET", "quotas").get("editions") or [], columns)


@editions.command("set")
def set_edition(
    ctx: typer.Context,
    edition: Annotated[str, typer.Argument(help="the edition's name")],
    limit: Annotated[list[str] | None, typer.Option(help="KIND=N concurrent leases (repeat it)")] = None,
    tenant: Annotated[list[str] | None, typer.Option(help="move this tenant to the edition (repeat it)")] = None,
) -> None:
    """Create or change an edition (PUT /quotas/{edition}; role PlatformAdmin). A kind not listed allows none."""
    s = state(ctx)
    body = {"limits": dict(_limit(text) for text in limit or []), "tenants": list(tenant or [])}
    s.out.document(s.api.call("PUT", f"quotas/{edition}", body=body))


def _limit(text: str) -> tuple[str, int]:
    kind, _, number = text.partition("=")
    if not kind or not number.isdigit():
        raise ApiError(f"--limit {text!r}: write KIND=N, e.g. sandbox=4", Exit.USAGE)
    return kind, int(number)
