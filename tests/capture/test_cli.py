"""``agentprof run`` captures unmodified programs (the example agent, ``python -m``), passes exit status on."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from agentprof.demo.model_server import Latency, ModelServer, Reply, ToolCall

from .capture_helpers import REPO, load, of_kind


def example_script(req):
    """Drive examples/openai_agent.py through three turns with real tool work."""
    if req.turn == 0:
        return Reply(tool_calls=[ToolCall("list_files", {}), ToolCall("search", {"pattern": r"def chain_hashes"})])
    if req.turn == 1:
        return Reply(tool_calls=[ToolCall("read_file", {"path": "hashing.py"}),
                                 ToolCall("run_python", {"code": "print(sum(i * i for i in range(10**5)))"})])
    return Reply(text="chain_hashes lives in hashing.py.")


def agentprof_run(args, env, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "agentprof.cli", "run", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def env_for(server):
    env = dict(os.environ, OPENAI_BASE_URL=server.openai_base_url, OPENAI_API_KEY="test")
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    return env


def trace_from(stderr):
    line = next(x for x in stderr.splitlines() if "trace written to" in x)
    return line.split("trace written to ", 1)[1].strip()


def test_example_agent_captured_without_changes(tmp_path):
    with ModelServer(script=example_script, latency=lambda *a: Latency(0.02, 0.0002)) as server:
        done = agentprof_run(["--out", str(tmp_path), "--instrument-subprocess", "--",
                              "python", "examples/openai_agent.py", "--root", "agentprof/trace"], env_for(server))
        log = list(server.log)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "chain_hashes lives in hashing.py."
    path = trace_from(done.stderr)
    assert path.startswith(str(tmp_path)) and os.path.basename(path).startswith("openai_agent-")
    trace, rows = load(path)
    (root,) = of_kind(rows, "agent")
    assert root["name"] == "invoke_agent openai_agent" and root["status"] == "ok"
    models = of_kind(rows, "model")
    assert len(models) == 3 == len(log)
    for m, served in zip(models, log, strict=True):
        assert m["input_tokens"] == served.prompt_tokens and m["output_tokens"] == served.output_tokens
        assert m["cache_read_tokens"] == served.cached_tokens and m["ttft_s"] >= 0.02
    subs = [r for r in of_kind(rows, "tool") if r["name"].startswith("execute_tool subprocess:")]
    # run_python's child, plus whatever the SDK ran while starting (e.g. `uname`)
    pythons = [s for s in subs if "python" in s["name"]]
    assert len(pythons) == 1 and pythons[0]["cpu_ns"] > 0
    assert all(r["session_id"] == root["session_id"] for r in rows)
    assert trace.meta.capture_overhead_ns > 0 and trace.meta.name == "openai_agent"


def test_exit_status_module_mode_and_exceptions(tmp_path):
    pkg = tmp_path / "mini"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(textwrap.dedent("""
        import sys
        import openai
        client = openai.OpenAI(max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        if sys.argv[1:] == ["crash"]:
            raise RuntimeError("boom")
        sys.exit(int(sys.argv[1]))
    """))
    with ModelServer(script=lambda req: Reply(text="hi")) as server:
        env = env_for(server)
        ok = agentprof_run(["--out", str(tmp_path / "t"), "--name", "mini-run", "--", "python", "-m", "mini", "7"],
                           env, cwd=tmp_path)
        crash = agentprof_run(["--out", str(tmp_path / "t"), "--", "python", "-m", "mini", "crash"], env, cwd=tmp_path)
    assert ok.returncode == 7
    _, rows = load(trace_from(ok.stderr))
    assert [r["kind"] for r in rows] == ["agent", "model"] and rows[0]["name"] == "invoke_agent mini-run"
    assert crash.returncode == 1 and "RuntimeError: boom" in crash.stderr
    _, rows = load(trace_from(crash.stderr))
    assert rows[0]["status"] == "error" and rows[0]["error_type"] == "RuntimeError"
    assert os.path.basename(trace_from(crash.stderr)).startswith("mini-")


def test_non_python_command_and_missing_program(tmp_path):
    done = agentprof_run(["--out", str(tmp_path), "--", "true"], dict(os.environ))
    assert done.returncode == 0 and "no trace recorded" in done.stderr
    assert list(tmp_path.iterdir()) == []
    missing = agentprof_run(["--out", str(tmp_path), "--", "/no/such/program"], dict(os.environ))
    assert missing.returncode == 127 and missing.stderr.startswith("error: cannot run '/no/such/program'")
    assert "Traceback" not in missing.stderr and list(tmp_path.iterdir()) == []
    plain = tmp_path / "not-executable"
    plain.write_text("echo hi\n")
    denied = agentprof_run(["--out", str(tmp_path), "--", str(plain)], dict(os.environ))
    assert denied.returncode == 126 and denied.stderr.startswith("error: cannot run")


def test_help_has_an_example():
    done = subprocess.run([sys.executable, "-m", "agentprof.cli", "run", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "agentprof run -- python my_agent.py" in done.stdout


@pytest.mark.parametrize("argv, name", [(["python", "agent.py", "-x"], "agent"), (["python", "-m", "pkg.tool"], "tool"),
                                        (["python3", "-u", "a/b.py"], "b"), (["./x.py"], "x"),
                                        (["python", "-W", "ignore", "a.py"], "a"), (["python", "-X", "dev", "a.py"], "a"),
                                        (["python", "-Wignore", "-X", "importtime", "-m", "pkg.mod"], "mod"),
                                        (["python", "-c", "print(1)"], "python-c"),
                                        (["python", "-u", "-W", "error", "-", "x"], "python-stdin")])
def test_default_name(argv, name):
    from agentprof.capture.runner import command_line, default_name

    assert default_name(argv) == name
    assert command_line(argv)[0] == sys.executable


def test_run_names_the_trace_after_the_script_past_interpreter_options(tmp_path):
    script = tmp_path / "myagent.py"
    script.write_text("print('ok')\n")
    done = agentprof_run(["--out", str(tmp_path / "t"), "--", "python", "-W", "ignore", "-X", "dev", str(script)],
                         dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert os.path.basename(trace_from(done.stderr)).startswith("myagent-")


@pytest.mark.parametrize("setup", ["under-a-file", "read-only", "sample-interval"])
def test_a_failed_recording_set_up_runs_the_program_unprofiled(tmp_path, setup):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    options = {"under-a-file": ["--out", str(blocker / "traces")],
               "read-only": ["--out", "/proc/agentprof-traces"],
               "sample-interval": ["--out", str(tmp_path / "t"), "--sample-interval", "0"]}[setup]
    done = agentprof_run([*options, "--", "python", "-c", "print('agent ran')"], dict(os.environ))
    assert done.returncode == 0 and done.stdout == "agent ran\n"
    warnings = [x for x in done.stderr.splitlines() if x.startswith("agentprof:")]
    assert len(warnings) == 1 and warnings[0].endswith("the program runs unprofiled"), done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "t").exists()


@pytest.mark.parametrize("program", [["missing.py"], ["-m", "no_such_module"], ["broken.py"]])
def test_a_program_that_never_ran_leaves_no_trace(tmp_path, program):
    (tmp_path / "broken.py").write_text("def f(:\n")
    done = agentprof_run(["--out", str(tmp_path / "t"), "--", "python", *program], dict(os.environ), cwd=tmp_path)
    assert done.returncode in (1, 2) and "no trace recorded" in done.stderr
    assert list((tmp_path / "t").iterdir()) == []
