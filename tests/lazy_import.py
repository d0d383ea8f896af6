"""Heavy SDKs imported when a test first uses them, not when pytest collects the file that names them: every
xdist worker collects every file, and litellm (~7 s of CPU) and anthropic (~4 s) would be imported by each."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for module ``name``: the first attribute read or write imports it (an ImportError then, as a plain
    import would raise it); writes go to the module."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def load(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        # what pytest's fixture discovery probes every module-level object for must not import the module
        if attr.startswith("__") or attr == "_mock_name":
            raise AttributeError(attr)
        return getattr(self.load(), attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        if attr in ("_name", "_module"):
            object.__setattr__(self, attr, value)
        else:
            setattr(self.load(), attr, value)
