"""Calling a function the way the Python worker does.

Arguments are passed by binding name: the trigger's value, then each input
binding that a provider supplies (the Durable client, in the Durable engine).
Async functions run on the host's event loop; sync ones in a thread pool
(``PYTHON_THREADPOOL_THREAD_COUNT``, as in the worker).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import os
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import azure.functions as func
from opentelemetry.util.types import Attributes

from devhost.catalog import BindingJson, FunctionInfo
from devhost.tracing import TRIGGERS, TraceCarrier, host_span

# binding type (lower case) -> value for an input binding of that type (handed to the app's function as is)
BindingProvider = Callable[[BindingJson, FunctionInfo], object]


class UnsupportedBinding(Exception):
    pass


class InvocationContext:
    """The ``context`` argument of a function (``azure.functions.Context``)."""

    def __init__(self, function_name: str) -> None:
        self.invocation_id = str(uuid.uuid4())
        self.function_name = function_name
        self.function_directory = os.getcwd()
        self.trace_context = None
        self.retry_context = None
        self.thread_local_storage = None


class Invoker:
    def __init__(self, providers: Mapping[str, BindingProvider] | None = None, max_threads: int | None = None) -> None:
        threads = max_threads or int(os.environ.get("PYTHON_THREADPOOL_THREAD_COUNT") or 32)
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="function")
        self._providers = dict(providers or {})

    def add_provider(self, binding_type: str, provider: BindingProvider) -> None:
        self._providers[binding_type.lower()] = provider

    def check_supported(self, function: FunctionInfo) -> None:
        for binding in function.bindings:
            kind = binding["type"].lower()
            if binding is function.trigger or binding.get("name") == "$return":
                continue
            if kind not in self._providers:
                raise UnsupportedBinding(
                    f"{function.name}: the local host does not support '{binding['type']}' bindings"
                )

    async def invoke(
        self,
        function: FunctionInfo,
        trigger_value: object,
        *,
        trace_parent: TraceCarrier | None = None,
        span_name: str | None = None,
        attributes: Attributes = None,
    ) -> object:
        """Call the function inside the host's invocation span (a child of ``trace_parent``, a W3C carrier).

        ``trigger_value`` is the trigger's value as the worker hands it (an ``HttpRequest``, a
        ``QueueMessage``, an activity's decoded input, ...); the result is whatever the function returned."""
        trigger = TRIGGERS.get(function.trigger["type"].lower(), "other")
        name = span_name or (
            f"{trigger_value.method} /{function.trigger.get('route') or function.name}"
            if trigger == "http" and isinstance(trigger_value, func.HttpRequest)
            else function.name
        )
        with host_span(
            name, trigger=trigger, parent=trace_parent, attributes={"faas.name": function.name, **(attributes or {})}
        ) as span:
            result = await self._call(function, trigger_value)
            status = getattr(result, "status_code", None)
            if trigger == "http" and isinstance(status, int):
                span.set_attribute("http.response.status_code", status)
            return result

    async def _call(self, function: FunctionInfo, trigger_value: object) -> object:
        kwargs = {function.trigger["name"]: trigger_value}
        for binding in function.bindings:
            kind = binding["type"].lower()
            if binding is not function.trigger and kind in self._providers:
                kwargs[binding["name"]] = self._providers[kind](binding, function)
        user_function = function.user_function
        if _wants_context(user_function) and "context" not in {binding.get("name") for binding in function.bindings}:
            kwargs["context"] = InvocationContext(function.name)
        if _is_async(user_function):
            return await user_function(**kwargs)
        loop = asyncio.get_running_loop()
        # The worker's thread runs in the invocation's context (its span is the parent of the function's spans).
        context = contextvars.copy_context()
        return await loop.run_in_executor(self._executor, functools.partial(context.run, user_function, **kwargs))

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


# A function's signature does not change while the host runs: read it once, not per invocation.
@functools.lru_cache(maxsize=1024)
def _wants_context(user_function: Callable[..., Any]) -> bool:
    return "context" in inspect.signature(user_function).parameters


@functools.lru_cache(maxsize=1024)
def _is_async(user_function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(user_function)
