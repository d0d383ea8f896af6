"""The capture tests pass on the oldest OpenTelemetry SDK agentprof supports too (opentelemetry-sdk 1.30.0 in
.venv-otel-oldest, made by scripts/setup_otel_oldest.sh): lean spans, the lean start path, the current-span
shortcut and the tool-call hot path read SDK internals, each checked at import, with fallbacks."""

from __future__ import annotations

import os
import subprocess

import pytest

from ..side_envs import WAIT_S, side_env, wait_for
from .capture_helpers import REPO

VENV_PY = REPO / ".venv-otel-oldest" / "bin" / "python"
# capture tests whose subject does not touch the SDK's internals (process death, signals and the `agentprof run`
# wrapper, load and stack sampling, examples and framework integrations, which that environment does not
# install): they run once, in the main environment, and are left out here to keep the suite within its time
# budget
NOT_SDK_SPECIFIC = ("test_sigkill.py", "test_sigkill_model.py", "test_load.py", "test_examples.py",
                    "test_sampler.py", "test_resource_faults.py", "test_frameworks.py",
                    "test_litellm.py", "test_other_instrumentors.py", "test_cli.py", "test_run_signals.py")

NOT_SDK_SPECIFIC_TESTS = ("test_fork.py::test_multiprocessing_forkserver_and_spawn_run_unprofiled_and_unharmed",)

pytestmark = [side_env, pytest.mark.timeout(WAIT_S + 900)]


def test_capture_on_the_oldest_supported_sdk():
    wait_for(VENV_PY.parents[1])
    if not VENV_PY.exists():
        pytest.skip(f"{VENV_PY} missing: run scripts/setup_otel_oldest.sh (needs the package registry)")
    probe = subprocess.run([str(VENV_PY), "-c", "import opentelemetry.sdk.version as v; print(v.__version__)"],
                           capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0 and probe.stdout.strip() == "1.30.0", probe.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST_"))}
    skip = [f"--ignore=tests/capture/{name}" for name in NOT_SDK_SPECIFIC] + [f"--deselect=tests/capture/{t}"
                                                                            for t in NOT_SDK_SPECIFIC_TESTS]
    done = subprocess.run([str(VENV_PY), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings",
                           "tests/capture", f"--ignore={__file__}", *skip], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout
