"""How an exception is named in a span's ``error.type`` (OpenTelemetry: the exception's qualified type)."""

from __future__ import annotations


def error_type(exc: BaseException) -> str:
    """``ValueError`` for builtins, ``openai.RateLimitError`` (private module parts dropped) otherwise."""
    cls = type(exc)
    module = cls.__module__ or ""
    if module == "builtins":
        return cls.__qualname__
    public = [p for p in module.split(".") if not p.startswith("_")]
    return ".".join([*public, cls.__qualname__])
