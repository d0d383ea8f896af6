"""The built wheel, installed into a fresh virtual environment outside the repository, runs ``agentprof demo``
(with the ``openai`` extra; without it, one line naming the extra), ``agentprof devices check`` on the shipped
calibration points, the README's replay of the kv-cache-tester samples and ``python -m agentprof``; building it
prints no setuptools warnings.

The fresh environment takes its dependencies from the test environment's installed copies instead of resolving
and unpacking them again (most of a minute): only the distributions the wheel's metadata requires, with the
``openai`` extra and their own requirements, are linked in, so a dependency the wheel forgets to declare is
missing there, and ``pip check`` holds each to the wheel's version bounds."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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


def _required(wheel_requires: list[str], extras: set[str]) -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions (of this test environment) that a wheel with ``wheel_requires`` and
    ``extras`` needs: its requirements whose markers hold, and theirs, with the extras each asks for."""
    out: dict[str, importlib.metadata.Distribution] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(r, extras) for r in wheel_requires]
    while todo:
        text, asked = todo.pop()
        req = Requirement(text)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in asked | {""}):
            continue
        name = canonicalize_name(req.name)
        if (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        out[name] = importlib.metadata.distribution(name)  # PackageNotFoundError: the test environment lacks it
        todo += [(r, set(req.extras)) for r in out[name].requires or []]
    return out


def _link_dists(dists: dict[str, importlib.metadata.Distribution], into: Path) -> dict[str, list[Path]]:
    """Symbolic links under ``into`` to what each of ``dists`` installed in site-packages (its RECORD): a regular
    package or a dist-info folder of one distribution as one link, a folder shared by several (a namespace
    package such as ``opentelemetry``) as a real folder with their parts linked in it, so that no other
    distribution's part comes along. Returns the links made, by distribution."""
    made: dict[str, list[Path]] = {name: [] for name in dists}
    files = [(name, d, f.parts) for name, d in dists.items() for f in d.files or [] if f.parts[0] != ".."]

    def place(depth: int, entries: list[tuple[str, importlib.metadata.Distribution, tuple[str, ...]]]) -> None:
        children: dict[str, list[tuple[str, importlib.metadata.Distribution, tuple[str, ...]]]] = {}
        for e in entries:
            children.setdefault(e[2][depth], []).append(e)
        for group in children.values():
            name, dist, parts = group[0]
            rel = Path(*parts[:depth + 1])
            src, dest = Path(str(dist.locate_file(rel))), into / rel
            owners = {e[0] for e in group}
            if len(parts) == depth + 1 or (len(owners) == 1 and (
                    rel.name.endswith(".dist-info") or (src / "__init__.py").is_file())):
                if src.exists() and not dest.exists():  # a file, or a folder that is one distribution's own
                    dest.symlink_to(src)
                    made[name].append(dest)
            else:
                dest.mkdir(parents=True, exist_ok=True)
                place(depth + 1, group)

    into.mkdir(parents=True, exist_ok=True)
    place(0, files)
    return made


def _unlink_all(links: list[Path], root: Path) -> None:
    """Remove ``links`` (under ``root``) and then their directories left without files, as uninstalling the
    distribution would (a directory left behind would import as a namespace package)."""
    for link in links:
        link.unlink()
    dirs = {d for p in links for d in p.parents if d != root and root in d.parents}
    for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
        shutil.rmtree(d / "__pycache__", ignore_errors=True)
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()


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
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path).returncode == 0
    py, exe = venv / "bin" / "python", venv / "bin" / "agentprof"
    pip = [sys.executable, "-m", "pip", "--python", str(py)]  # this environment's pip, acting on the fresh one
    inst = _run([*pip, "install", "-q", "--no-deps", str(wheel)], tmp_path)
    assert inst.returncode == 0, inst.stderr[-3000:]
    assert "license" not in inst.stderr.lower()
    site = next((venv / "lib").glob("python*/site-packages"))
    meta = importlib.metadata.Distribution.at(next(site.glob("agentprof-*.dist-info")))
    needed = _required(meta.requires or [], {"openai"})
    assert {"numpy", "polars", "scipy", "openai"} <= set(needed) and "pytest" not in needed
    deps = venv / "deps"  # inside the environment, as installed packages are
    links = _link_dists(needed, deps)
    (site / "test-environment-deps.pth").write_text(f"{deps}\n", encoding="utf-8")
    check = _run([*pip, "check"], tmp_path)
    assert check.returncode == 0, check.stdout[-3000:]

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

    # the calibration points travel in the wheel: the documented path resolves to the shipped copy (a fit on them
    # runs the same code from the same file: tests/replay/test_user_fit.py)
    chk = _run([str(exe), "devices", "check", "data/inferencex/calibration_points.csv", "--json"], work)
    assert chk.returncode == 0, chk.stderr[-3000:]
    checked = json.loads(chk.stdout)
    assert checked["points"] == checked["covered"] > 1000 and not (work / "data").exists()

    # the README's headline command names the kv-cache-tester samples: the wheel carries them
    rep = _run([str(exe), "replay", "traces/samples/kv-cache-tester", "-s", "h200+x86", "--json"], work)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert json.loads(rep.stdout)["sessions"] == 19 and not (work / "traces").exists()

    _unlink_all(links["openai"], deps)  # as `pip uninstall openai` would leave it (the links only: they are ours)
    assert _run([str(py), "-c", "import openai"], work).returncode == 1
    bare = _run([str(exe), "demo", "--out", "r2", "--traces", "t2"], work)
    assert bare.returncode == 2 and "Traceback" not in bare.stderr
    assert bare.stderr.strip().splitlines() == ["error: the demo's agent needs the openai SDK: "
                                                "pip install 'agentprof[openai]'"]
