"""numpy's huge-page advice: off in the commands that load traces, unless the user set it."""

from __future__ import annotations

import os
import subprocess
import sys

CODE = """
from numpy._core import multiarray as m
from agentprof.hugepages import avoid_numpy_hugepages
before = m._get_madvise_hugepage()
changed = avoid_numpy_hugepages()
print(before, changed, m._get_madvise_hugepage())
"""


def _run(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True,
                          check=True).stdout.split()


def test_turned_off_unless_the_user_chose():
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    before, changed, after = _run(env)
    assert changed == "True" and after == "False"
    assert _run({**env, "NUMPY_MADVISE_HUGEPAGE": "1"}) == ["True", "False", "True"]  # the user's choice stays

