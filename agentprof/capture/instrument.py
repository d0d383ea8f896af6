"""Install the SDK instrumentation without importing any SDK.

SDK modules already imported are patched at once; the others are patched the moment the agent imports
them, by a ``sys.meta_path`` finder that runs the patch right after the module's own code. The patches stay
(they cost one context-variable lookup per call when no profile is active).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from agentprof.capture import anthropic_sdk, frameworks, litellm_hook, openai_sdk
from agentprof.capture.failsafe import internal_error

TARGETS: dict[str, Callable[[ModuleType], list[str]]] = {**openai_sdk.TARGETS, **anthropic_sdk.TARGETS,
                                                         **litellm_hook.TARGETS, **frameworks.TARGETS}
PATCHED: dict[str, list[str]] = {}
"""Module name -> methods patched in it (for diagnostics and tests)."""

_lock = threading.Lock()
_installed = False


def _apply(module: ModuleType) -> None:
    name = getattr(module, "__name__", "")
    patch = TARGETS.get(name)
    if patch is None or name in PATCHED:
        return
    try:
        PATCHED[name] = patch(module)
    except Exception as e:
        internal_error(f"instrumenting {name}", e)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds target modules through the other finders and patches them once they have executed."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname not in TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_and_patch(module: ModuleType) -> None:
            exec_module(module)
            _apply(module)

        try:
            loader.exec_module = exec_and_patch  # type: ignore[union-attr]
        except Exception:
            return spec
        return spec


def ensure() -> None:
    """Patch loaded SDK modules now and the others when imported (idempotent)."""
    global _installed
    if _installed:
        try:
            frameworks.refresh()
        except Exception as e:
            internal_error("refreshing framework hooks", e)
        return
    with _lock:
        if _installed:
            return
        if not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
            sys.meta_path.insert(0, _PatchOnImport())
        for name in TARGETS:
            module = sys.modules.get(name)
            if module is not None:
                _apply(module)
        _installed = True
