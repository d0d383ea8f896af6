"""Build hook: copy the repository data files a wheel needs (``agentprof.resources.SHIPPED_FILES``: the
calibration points and the demo's sample sessions) into ``agentprof/_bundled/`` of the built package.
Everything else about the package is declared in ``pyproject.toml``."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def shipped_files() -> list[str]:
    """The ``SHIPPED_FILES`` literal of agentprof/resources.py (read, not imported: no dependencies at build)."""
    tree = ast.parse((HERE / "agentprof" / "resources.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "SHIPPED_FILES":
            return list(ast.literal_eval(node.value))  # type: ignore[arg-type]
    raise RuntimeError("agentprof/resources.py has no SHIPPED_FILES")


class BuildWithData(build_py):
    """``build_py`` that also copies the shipped data files under ``agentprof/_bundled/``."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "agentprof" / "_bundled"
        for rel in shipped_files():
            src = HERE / rel
            if not src.exists():
                raise FileNotFoundError(f"{rel}: listed in agentprof.resources.SHIPPED_FILES but not in the tree")
            dest = target / rel
            if src.is_dir():
                shutil.copytree(src, dest, dirs_exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)


setup(cmdclass={"build_py": BuildWithData})
