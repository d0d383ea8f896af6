"""A small coding agent: it lists, reads, searches, edits and tests a repository with tools a model picks.

Plain agent code, written the way users write theirs: the ``openai`` SDK with streaming, a tool registry,
JSON tool arguments, parallel tool execution and a loop. Nothing here knows about agentprof: ``agentprof
demo`` wraps :func:`run` with ``agentprof.profile`` and the entries of :data:`TOOLS` with ``agentprof.tool``
from the outside, which is how you can profile an agent you do not want to edit.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

SYSTEM_PROMPT = """You are a careful software engineer working in a Python repository.
Use the tools to inspect the code, run the tests, and make the smallest correct change.
Always run the tests after editing. Answer with a short summary of what you changed and why.
Tools take JSON arguments; paths are relative to the repository root."""

TOOL_SPECS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "list_files", "description": "List the repository's files.",
        "parameters": {"type": "object", "properties": {}, "required": []}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a text file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the repository for a regular expression.",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}},
    {"type": "function", "function": {
        "name": "edit_file", "description": "Replace one exact occurrence of `old` by `new` in a file.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            "required": ["path", "old", "new"]}}},
    {"type": "function", "function": {
        "name": "run_tests", "description": "Run the repository's unit tests.",
        "parameters": {"type": "object", "properties": {}, "required": []}}},
]

MAX_RESULT_CHARS = 6000


def list_files(repo: Path) -> str:
    files = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return "\n".join(files)


def read_file(repo: Path, path: str) -> str:
    return (repo / path).read_text(encoding="utf-8")


def search(repo: Path, pattern: str) -> str:
    rx = re.compile(pattern)
    hits = []
    for p in sorted(repo.rglob("*.py")):
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1):
            if rx.search(line):
                hits.append(f"{p.relative_to(repo)}:{n}: {line.strip()}")
    return "\n".join(hits) or "no matches"


def edit_file(repo: Path, path: str, old: str, new: str) -> str:
    target = repo / path
    text = target.read_text(encoding="utf-8")
    if text.count(old) != 1:
        return f"error: expected exactly one occurrence of the old text, found {text.count(old)}"
    target.write_text(text.replace(old, new), encoding="utf-8")
    return f"edited {path}"


def run_tests(repo: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "unittest", "discover", "-s", "tests", "-v"], cwd=repo,
                          capture_output=True, text=True, timeout=120)
    return f"exit code {proc.returncode}\n{proc.stderr[-4000:]}"


TOOLS: dict[str, Callable[..., str]] = {
    "list_files": list_files,
    "read_file": read_file,
    "search": search,
    "edit_file": edit_file,
    "run_tests": run_tests,
}


def _collect(stream: Any) -> tuple[str, list[dict[str, Any]]]:
    """Assemble a streamed chat completion into text and tool calls."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
            for tc in delta.tool_calls or ():
                slot = calls.setdefault(tc.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}})
                if tc.id:
                    slot["id"] = tc.id
                if tc.function and tc.function.name:
                    slot["function"]["name"] += tc.function.name
                if tc.function and tc.function.arguments:
                    slot["function"]["arguments"] += tc.function.arguments
    return "".join(text), [calls[i] for i in sorted(calls)]


def _execute(repo: Path, call: dict[str, Any]) -> str:
    name = call["function"]["name"]
    try:
        args = json.loads(call["function"]["arguments"] or "{}")
        result = TOOLS[name](repo, **args)
    except Exception as e:  # a tool failure is reported to the model, as real agents do
        result = f"error: {type(e).__name__}: {e}"
    if len(result) > MAX_RESULT_CHARS:
        result = result[:MAX_RESULT_CHARS] + "\n[truncated]"
    return json.dumps({"tool": name, "output": result})


def run(task: str, repo: str | Path, client: Any, model: str, max_steps: int = 20,
        system_prompt: str | Callable[[], str] = SYSTEM_PROMPT) -> str:
    """Work on ``task`` in ``repo`` until the model answers without calling a tool; return that answer.

    ``system_prompt`` may be a function, rendered again before every model call (as agents that put the
    current time or state into their system prompt do).
    """
    root = Path(repo)
    render = system_prompt if callable(system_prompt) else None
    messages: list[dict[str, Any]] = [{"role": "system", "content": render() if render else system_prompt},
                                      {"role": "user", "content": task}]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for step in range(max_steps):
            if render is not None and step:
                messages[0] = {"role": "system", "content": render()}
            stream = client.chat.completions.create(model=model, messages=messages, tools=TOOL_SPECS, stream=True,
                                                    stream_options={"include_usage": True})
            text, calls = _collect(stream)
            messages.append({"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})})
            if not calls:
                return text
            results = list(pool.map(lambda c: _execute(root, c), calls))
            for call, result in zip(calls, results, strict=True):
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return "stopped: step limit reached"
