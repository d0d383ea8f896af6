"""The built wheel, installed into a fresh virtual environment outside the repository, runs ``agentprof demo``
(with the ``openai`` extra; without it, one line naming the extra), ``agentprof devices fit``, the README's
replay of the kv-cache-tester samples and ``python -m agentprof``; building it prints no setuptools warnings."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentprof.resources import SHIPPED_FILES

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _source_copy(dest: Path) -> Path:
    """What a clean checkout has that the build reads (so the build writes nothing into this tree)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "agentprof", dest / "agentprof", ignore=ignore)
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for rel in SHIPPED_FILES:
        src, out = ROOT / rel, dest / rel
        if src.is_dir():
            shutil.copytree(src, out, ignore=ignore)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, out)
    return dest


def _run(cmd: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "OTEL_"))}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.timeout(900)  # a build, a fresh virtual environment and its installs: minutes on a busy machine
def test_wheel_installs_and_runs_outside_the_repository(tmp_path: Path) -> None:
    src = _source_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    built = _run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(dist), str(src)], tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    log = built.stdout + built.stderr
    for needle in ("BuildBackendWarning", "SetuptoolsDeprecationWarning", "`project.license`"):
        assert needle not in log, f"setuptools warns while building: {needle}"
    wheel = next(dist.glob("agentprof-*.whl"))

    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)], tmp_path).returncode == 0
    py, exe = venv / "bin" / "python", venv / "bin" / "agentprof"
    inst = _run([str(py), "-m", "pip", "install", "-q", f"{wheel}[openai]"], tmp_path, timeout=600)
    assert inst.returncode == 0, inst.stderr[-3000:]
    assert "license" not in inst.stderr.lower()

    work = tmp_path / "elsewhere"  # no repository around: everything must come from the wheel
    work.mkdir()
    where = _run([str(py), "-c", "import agentprof, sys; print(agentprof.__file__)"], work)
    assert str(venv) in where.stdout and str(ROOT) not in where.stdout

    version = _run([str(py), "-m", "agentprof", "--version"], work)
    assert version.returncode == 0 and "agentprof" in version.stdout

    demo = _run([str(exe), "demo", "--out", "r", "--traces", "t"], work)
    assert demo.returncode == 0, demo.stderr[-3000:]
    html = (work / "r" / "demo.html").read_text(encoding="utf-8")
    assert "codex" in html.lower() and len(list((work / "t").glob("demo-agent-*.jsonl"))) == 1

    fit = _run([str(exe), "devices", "fit", "--out", "fitted.toml", "--json", "--skip-levels"], work)
    assert fit.returncode == 0, fit.stderr[-3000:]
    assert (work / "fitted.toml").is_file() and '"points_used"' in fit.stdout

    # the README's headline command names the kv-cache-tester samples: the wheel carries them
    rep = _run([str(exe), "replay", "traces/samples/kv-cache-tester", "-s", "h200+x86", "--json"], work)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert json.loads(rep.stdout)["sessions"] == 19 and not (work / "traces").exists()

    assert _run([str(py), "-m", "pip", "uninstall", "-q", "-y", "openai"], work).returncode == 0
    bare = _run([str(exe), "demo", "--out", "r2", "--traces", "t2"], work)
    assert bare.returncode == 2 and "Traceback" not in bare.stderr
    assert bare.stderr.strip().splitlines() == ["error: the demo's agent needs the openai SDK: "
                                                "pip install 'agentprof[openai]'"]
