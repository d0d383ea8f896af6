"""Imported at interpreter start-up in a process launched by ``agentprof run`` (via ``PYTHONPATH``).

Starts a profile covering the whole process (configuration from ``AGENTPROF_RUN_CONFIG``), removes itself
from the environment so child processes are not profiled into the same file, then runs any other
``sitecustomize`` the environment had.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_config = os.environ.pop("AGENTPROF_RUN_CONFIG", None)
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != _here]
if _paths:
    os.environ["PYTHONPATH"] = os.pathsep.join(_paths)
else:
    os.environ.pop("PYTHONPATH", None)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

if _config:
    try:
        from agentprof.capture.runner import start_process_profile

        start_process_profile(_config)
    except Exception as _e:  # never stop the agent from running
        sys.stderr.write(f"agentprof: could not start profiling ({type(_e).__name__}: {_e})\n")


def _chain() -> None:
    import importlib.machinery
    import importlib.util

    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None or os.path.dirname(os.path.abspath(spec.origin or "")) == _here:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _chain()
except Exception as _e:
    sys.stderr.write(f"agentprof: the environment's own sitecustomize failed ({type(_e).__name__}: {_e})\n")
