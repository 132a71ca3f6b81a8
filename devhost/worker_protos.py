"""A stand-in for the Functions worker's generated protobuf messages.

The worker's loader and registry (``azure_functions_runtime``) receive the
gRPC message classes as a ``protos`` argument instead of importing them, and
the generated module is not shipped in the wheel. Validation only compares
binding directions and data types against the enum values below and builds a
few metadata messages, so plain classes with the same names and the same enum
numbers (from the worker's ``FunctionRpc.proto``) are enough.
"""

from __future__ import annotations

from types import SimpleNamespace


class _Message:
    """A message that keeps its fields, like a generated protobuf class."""

    def __init__(self, **fields: object) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__dict__!r})"


class BindingInfo(_Message):
    # enum Direction { in = 0; out = 1; inout = 2; } — `in` is a keyword, set below
    out = 1
    inout = 2
    # enum DataType { undefined = 0; string = 1; binary = 2; stream = 3; }
    undefined = 0
    string = 1
    binary = 2
    stream = 3


setattr(BindingInfo, "in", 0)


class RpcFunctionMetadata(_Message):
    pass


class RpcRetryOptions(_Message):
    pass


class ParameterBinding(_Message):
    pass


def worker_protos() -> SimpleNamespace:
    """The ``protos`` namespace the worker's loader and registry expect."""
    return SimpleNamespace(
        BindingInfo=BindingInfo,
        RpcFunctionMetadata=RpcFunctionMetadata,
        RpcRetryOptions=RpcRetryOptions,
        ParameterBinding=ParameterBinding,
    )
