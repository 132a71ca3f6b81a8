"""The host's HTTP API over httpx: one request, problem documents as :class:`ApiError`, paged lists."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx

from runtime_cloud_cli.exit_codes import Exit, for_status

API_PREFIX = "runtime-cloud"
MAX_PAGES = 10_000  # a server that kept answering a continuation forever must not keep the CLI forever


class ApiError(Exception):
    """An answer the command cannot go on with, said in one line, with the exit code it means."""

    def __init__(self, message: str, exit_code: Exit, status: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.status = status


class Api:
    """Calls ``{base_url}/runtime-cloud/...`` with a bearer token the CLI fetches when first needed."""

    def __init__(self, base_url: str, token: Callable[[], str], timeout: float = 30.0) -> None:
        self._base_url = base_url.rstrip("/")
        self._token = token
        self._http = httpx.Client(timeout=timeout)
        self._bearer: str | None = None

    def close(self) -> None:
        self._http.close()

    def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """The answer's JSON (``None`` for an empty answer); an error answer raises :class:`ApiError`."""
        if self._bearer is None:
            self._bearer = self._token()
        url = f"{self._base_url}/{API_PREFIX}/{path.lstrip('/')}"
        query = {name: value for name, value in (params or {}).items() if value is not None}
        try:
            answer = self._http.request(
                method,
                url,
                params=query,
                json=body,
                headers={"Authorization": f"Bearer {self._bearer}", **(headers or {})},
            )
        except httpx.HTTPError as error:
            raise ApiError(f"cannot reach {self._base_url}: {error}", Exit.UNAVAILABLE) from None
        if answer.is_error:
            raise ApiError(problem_line(answer), for_status(answer.status_code), answer.status_code)
        if not answer.content:
            return None
        try:
            return answer.json()
        except ValueError:
            raise ApiError(f"{method} {url}: the answer is not JSON", Exit.UNAVAILABLE) from None

    def pages(self, path: str, key: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Every item of a list, following ``continuation`` while the host hands one out (lists without
        paging answer everything at once, with no continuation)."""
        query = dict(params or {})
        for _ in range(MAX_PAGES):
            page = self.call("GET", path, params=query)
            yield from page.get(key) or []
            continuation = page.get("continuation")
            if not continuation:
                return
            query["continuation"] = continuation
        raise ApiError(f"GET {path}: more than {MAX_PAGES} pages", Exit.UNAVAILABLE)


def problem_line(answer: httpx.Response) -> str:
    """An error answer in one line: status, the problem's type and detail, and each invalid field."""
    try:
        problem = answer.json()
    except ValueError:
        problem = None
    if not isinstance(problem, dict):
        text = answer.text.strip().splitlines()[0][:200] if answer.text.strip() else answer.reason_phrase
        return f"{answer.status_code}: {text}"
    kind = str(problem.get("type", "")).rsplit(":", 1)[-1] or answer.reason_phrase
    detail = problem.get("detail") or problem.get("title") or ""
    line = f"{answer.status_code} {kind}: {detail}".rstrip(": ")
    fields = [f"{error.get('path', '')} {error.get('message', '')}".strip() for error in problem.get("errors") or []]
    if fields:
        line += " (" + "; ".join(fields) + ")"
    retry = answer.headers.get("Retry-After")
    if retry:
        line += f" (retry after {retry} s)"
    return line
