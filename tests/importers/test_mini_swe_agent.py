"""mini-swe-agent trajectories: calls, tokens, tools and the exact linear prompts."""

from __future__ import annotations

import json

import polars as pl
import pytest

from agentprof.importers import load_any
from agentprof.trace.prompt import PromptHasher, openai_chat_segments

from .importer_helpers import SAMPLES, imported, kinds, median_late_share

TRAJ = SAMPLES / "mini-swe-agent" / "django__django-13807.traj.json"


def test_counts_tokens_and_prompts():
    doc = json.loads(TRAJ.read_text())
    assistant = [i for i, m in enumerate(doc["messages"]) if m["role"] == "assistant"]
    assert len(assistant) == doc["info"]["model_stats"]["api_calls"] == 36
    tr = imported("mini-swe-agent")
    k = kinds(tr.spans)
    observations = sum(1 for i in assistant if i + 1 < len(doc["messages"]) and doc["messages"][i + 1]["role"] == "user")
    assert (k["model"], k["tool"], k["agent"]) == (36, observations, 1)
    m = tr.spans.filter(pl.col("kind") == "model").sort("end_ns")
    usages = [doc["messages"][i]["extra"]["response"]["usage"] for i in assistant]
    assert m.get_column("input_tokens").sum() == sum(u["prompt_tokens"] for u in usages)
    assert m.get_column("cache_read_tokens").sum() == sum(u["prompt_tokens_details"]["cached_tokens"] for u in usages)
    assert m.get_column("reasoning_tokens").sum() == sum(u["completion_tokens_details"]["reasoning_tokens"]
                                                         for u in usages)
    # call k's prompt is messages[:i] of its assistant message
    k7 = assistant[7]
    fp = PromptHasher(tr.meta.tokenizer).fingerprint(openai_chat_segments(
        [{"role": x["role"], "content": x["content"]} for x in doc["messages"][:k7]]))
    assert m.get_column("block_hashes").to_list()[7] == fp.block_hashes
    assert 0.93 <= median_late_share(m) <= 0.995
    ends = m.get_column("end_ns").to_list()
    assert ends == [doc["messages"][i]["extra"]["response"]["created"] * 10**9 for i in assistant]
    assert m.get_column("start_ns").to_list()[1:] == ends[:-1]


T0 = 1_760_000_000.0


def _v2_chat() -> dict:
    """A mini-swe-agent 2.x trajectory (``mini-swe-agent-1.1``) from a tool-calling chat model, written as
    ``LitellmToolcallModel`` and the agent write it: every appended message stamped (``extra.timestamp``),
    observations as ``tool`` messages, a format error as a ``user`` message, an ``exit`` message at the end."""
    def asst(k, t, cmds, pt, cached):
        calls = [{"id": f"c{k}{j}", "type": "function", "function": {"name": "bash",
                                                                   "arguments": json.dumps({"command": c})}}
                 for j, c in enumerate(cmds)]
        return {"role": "assistant", "content": None, "tool_calls": calls,
                "extra": {"actions": [{"command": c, "tool_call_id": f"c{k}{j}"} for j, c in enumerate(cmds)],
                          "response": {"id": f"chatcmpl-{k}", "created": int(t - 2), "model": "gpt-5-mini",
                                       "usage": {"prompt_tokens": pt, "completion_tokens": 40,
                                                 "prompt_tokens_details": {"cached_tokens": cached}}},
                          "cost": 0.01, "timestamp": t}}

    def obs(k, j, t, rc=0):
        return {"role": "tool", "tool_call_id": f"c{k}{j}", "content": f"<returncode>{rc}</returncode>",
                "extra": {"raw_output": "", "returncode": rc, "timestamp": t}}

    msgs = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the bug. " * 200, "extra": {"timestamp": T0}},
            asst(0, T0 + 3.0, ["ls"], 2000, 0), obs(0, 0, T0 + 3.5),
            asst(1, T0 + 7.0, ["cat a.py", "pytest -q"], 2100, 1900),
            obs(1, 0, T0 + 19.25), obs(1, 1, T0 + 19.2502, 1),  # both stamped once the batch has run
            {"role": "user", "content": "Please always provide EXACTLY ONE action",
             "extra": {"interrupt_type": "FormatError"}},
            asst(2, T0 + 25.0, ["echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"], 2300, 2100), obs(2, 0, T0 + 25.5),
            {"role": "exit", "content": "diff", "extra": {"exit_status": "Submitted", "submission": "diff"}}]
    return {"info": {"mini_version": "2.1.0", "model_stats": {"instance_cost": 0.03, "api_calls": 3},
                     "config": {"model": {"model_name": "openai/gpt-5-mini"}}, "exit_status": "Submitted"},
            "messages": msgs, "trajectory_format": "mini-swe-agent-1.1", "instance_id": "demo__demo-1"}


def test_v2_stamps_split_model_and_command_time(tmp_path):
    doc = _v2_chat()
    p = tmp_path / "demo__demo-1.traj.json"
    p.write_text(json.dumps(doc, indent=2))
    df = load_any(p).spans
    m = df.filter(pl.col("kind") == "model").sort("end_ns")
    tools = df.filter(pl.col("kind") == "tool").sort("end_ns")
    def secs(df):
        return [None if x is None else x / 1e9 - T0 for row in df.select("start_ns", "end_ns").iter_rows()
                for x in row]

    assert secs(m) == pytest.approx([0.0, 3.0, 3.5, 7.0, 19.2502, 25.0])  # from the stamp before each request
    # one bash span per observation (not for the format error), timed between stamps, exit codes kept; the two
    # commands of call 2 ran in turn before either was stamped: the first span holds both, the second no time
    tools = df.filter(pl.col("kind") == "tool").sort("end_ns", nulls_last=True)
    assert secs(tools) == pytest.approx([3.0, 3.5, 7.0, 19.25, 25.0, 25.5, None, None])
    batch = [json.loads(a).get("agentprof.tool.batch_size") for a in tools.get_column("attributes")]
    assert batch == [None, 2, None, None]
    assert tools.get_column("status").to_list() == ["ok", "ok", "ok", "error"]
    assert m.get_column("input_tokens").to_list() == [2000, 2100, 2300]
    assert m.get_column("cache_read_tokens").to_list() == [0, 1900, 2100]
    # call 3's prompt: every message before it, the exit message never
    msgs = doc["messages"]
    keep = [{k: x[k] for k in ("role", "content", "tool_calls", "tool_call_id") if x.get(k) is not None}
            for x in msgs[:8]]
    fp = PromptHasher(load_any(p).meta.tokenizer).fingerprint(openai_chat_segments(keep))
    assert m.get_column("block_hashes").to_list()[2] == fp.block_hashes


def test_v2_responses_api_objects_are_model_calls(tmp_path):
    """Responses API models store the response object itself in ``messages`` (no role); its output items
    are what later prompts repeat, observations are ``function_call_output`` items."""
    def resp(k, t, inp, cached):
        return {"id": f"resp_{k}", "object": "response", "created_at": int(t - 3), "completed_at": int(t),
                "model": "gpt-5.5-2026-04-23",
                "output": [{"type": "function_call", "call_id": f"fc{k}", "name": "bash",
                            "arguments": json.dumps({"command": "ls"})}],
                "usage": {"input_tokens": inp, "output_tokens": 30, "input_tokens_details": {"cached_tokens": cached},
                          "output_tokens_details": {"reasoning_tokens": 10}},
                "extra": {"actions": [{"command": "ls", "tool_call_id": f"fc{k}"}], "cost": 0.0, "timestamp": t}}

    def out(k, t):
        return {"type": "function_call_output", "call_id": f"fc{k}", "output": "a.py",
                "extra": {"raw_output": "a.py", "returncode": 0, "timestamp": t}}

    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task " * 100},
            resp(0, T0 + 4, 1500, 0), out(0, T0 + 5), resp(1, T0 + 9, 1600, 1400), out(1, T0 + 10)]
    p = tmp_path / "r.traj.json"
    p.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1.1", "messages": msgs,
                             "info": {"mini_version": "2.2.8"}}))
    tr = load_any(p)
    m = tr.spans.filter(pl.col("kind") == "model").sort("end_ns")
    assert m.height == 2 and kinds(tr.spans)["tool"] == 2
    assert m.get_column("model").to_list() == ["gpt-5.5-2026-04-23"] * 2
    assert m.get_column("reasoning_tokens").to_list() == [10, 10]
    assert m.get_column("cache_read_tokens").to_list() == [0, 1400]
    assert (m.get_column("start_ns")[1] / 1e9 - T0) == pytest.approx(5.0)
    b = m.get_column("block_hashes").to_list()
    assert b[1][:len(b[0]) - 1] == b[0][:-1]  # append-only: call 2 extends call 1's prompt


def test_a_bare_message_list_imports(tmp_path):
    """Early trajectories (and the project's test data) are a bare list of messages: calls and prompts, no
    timing or usage."""
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"},
            {"role": "assistant", "content": "```bash\nls\n```"}, {"role": "user", "content": "a.py"},
            {"role": "assistant", "content": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
            {"role": "user", "content": ""}]
    p = tmp_path / "local.traj.json"
    p.write_text(json.dumps(msgs, indent=2))
    tr = load_any(tmp_path)  # found by --from auto in a folder
    assert kinds(tr.spans)["model"] == 2 and tr.meta.source_format == "mini-swe-agent"


FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures_msa"


def _tool_spans(path):
    df = load_any(path).spans
    return df, df.filter(pl.col("kind") == "tool")


def test_v1_format_error_replies_are_not_commands():
    """A 1.x response without exactly one bash block is answered with the rendered ``format_error_template``:
    no command ran, so no bash span; a timed-out command ran and is an error (synthetic fixture)."""
    p = FIXTURES / "v1-format-error-timeout.traj.json"
    doc = json.loads(p.read_text())
    msgs, agent = doc["messages"], doc["info"]["config"]["agent"]
    fmt = agent["format_error_template"].split("{{")[0].strip()
    tmo = agent["timeout_template"].split("{{")[0].strip()
    replies = [msgs[i + 1]["content"] for i, m in enumerate(msgs) if m["role"] == "assistant"]
    ran = [r for r in replies if not r.startswith(fmt)]
    assert 0 < len(ran) < len(replies)  # the fixture holds both kinds
    df, tools = _tool_spans(p)
    assert kinds(df)["model"] == len(replies) == doc["info"]["model_stats"]["api_calls"]
    assert tools.height == len(ran)
    assert tools.filter(pl.col("error_type") == "timeout").height == sum(r.startswith(tmo) for r in ran) == 1


def test_v2_batch_not_executed_and_submit():
    """2.x (synthetic fixture in the layout of a real tool-calling trajectory): commands of one response are
    stamped together after all ran, a padded output was never run, the submitting command leaves only the
    ``exit`` message."""
    p = FIXTURES / "v2-batch-submit.traj.json"
    msgs = json.loads(p.read_text())["messages"]
    df, tools = _tool_spans(p)
    observations = [m for m in msgs if m["role"] == "tool"]
    not_run = [m for m in observations if m["extra"]["exception_info"] == "action was not executed"]
    assert msgs[-1]["role"] == "exit" and msgs[-2]["role"] == "assistant"
    assert tools.height == len(observations) + 1  # + the submitting command
    assert tools.filter(pl.col("error_type") == "not_executed").height == len(not_run) == 1
    timed = tools.filter(pl.col("start_ns").is_not_null()).sort("start_ns")
    # one timed span per response with run observations: from the response's stamp to its first observation's
    stamps, ran = [], []
    for i, m in enumerate(msgs):
        if m["role"] == "assistant" and i + 1 < len(msgs) and msgs[i + 1]["role"] == "tool":
            stamps += [m["extra"]["timestamp"], msgs[i + 1]["extra"]["timestamp"]]
            obs = [o for o in msgs[i + 1:i + 1 + len(m["extra"]["actions"])] if o["role"] == "tool"]
            ran.append(sum(o["extra"]["exception_info"] != "action was not executed" for o in obs))
    got = [x / 1e9 for row in timed.select("start_ns", "end_ns").iter_rows() for x in row]
    assert got == pytest.approx(stamps, abs=1e-6)
    batch = [json.loads(a).get("agentprof.tool.batch_size") for a in timed.get_column("attributes")]
    assert batch == [n if n > 1 else None for n in ran] == [None, 3, None]
    m = df.filter(pl.col("kind") == "model")
    assert m.get_column("cache_read_tokens").sum() == sum(
        x["extra"]["response"]["usage"]["prompt_tokens_details"]["cached_tokens"] for x in msgs if x["role"] == "assistant")
