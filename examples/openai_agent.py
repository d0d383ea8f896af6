"""A small tool-using agent written with the plain ``openai`` SDK (it knows nothing about agentprof).

It answers a question about a folder of files by letting the model call tools that do real work: list and
read files, search them with a regular expression, and run a Python snippet in a child process. Tool calls
of one turn run in parallel on a thread pool; model answers are streamed.

Run it against any OpenAI-compatible endpoint (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``), for example the
loopback server agentprof ships for demos, and profile it without changing a line:

    agentprof run --instrument-subprocess -- python examples/openai_agent.py --root agentprof/trace
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

TOOLS = [
    {"type": "function", "function": {
        "name": "list_files", "description": "List the files under the root folder.",
        "parameters": {"type": "object", "properties": {}, "required": []}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read one file (path relative to the root).",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Lines matching a regular expression, as path:line: text.",
        "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}}},
    {"type": "function", "function": {
        "name": "run_python", "description": "Run a Python snippet and return what it prints.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}},
]


class Tools:
    def __init__(self, root: Path) -> None:
        self.root = root

    def list_files(self) -> str:
        return "\n".join(sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file()
                                and "__pycache__" not in p.parts))

    def read_file(self, path: str) -> str:
        return (self.root / path).read_text(errors="replace")[:8000]

    def search(self, pattern: str) -> str:
        rx = re.compile(pattern)
        hits = []
        for p in sorted(self.root.rglob("*.py")):
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{p.relative_to(self.root)}:{n}: {line.strip()}")
        return "\n".join(hits[:200]) or "no matches"

    def run_python(self, code: str) -> str:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                              cwd=self.root)
        return (done.stdout + done.stderr)[-4000:]

    def call(self, name: str, arguments: str) -> str:
        args = json.loads(arguments or "{}")
        try:
            return str(getattr(self, name)(**args))
        except Exception as e:  # the model sees tool errors, as in real agents
            return f"error: {type(e).__name__}: {e}"


def turn(client: openai.OpenAI, model: str, messages: list[dict]) -> tuple[str, list[dict]]:
    """One streamed model turn: the text and the tool calls it asked for."""
    stream = client.chat.completions.create(model=model, messages=messages, tools=TOOLS, stream=True,
                                            stream_options={"include_usage": True})
    text, calls = [], {}
    for chunk in stream:
        for choice in chunk.choices:
            text.append(choice.delta.content or "")
            for tc in choice.delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = slot["id"] or tc.id or ""
                slot["name"] = slot["name"] or (tc.function.name or "")
                slot["arguments"] += tc.function.arguments or ""
    return "".join(text), [calls[i] for i in sorted(calls)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".", help="folder the tools work in")
    ap.add_argument("--question", default="Which module defines the block hashing, and how many tests cover it?")
    ap.add_argument("--model", default=os.environ.get("AGENT_MODEL", "gpt-4o-mini"))
    ap.add_argument("--max-turns", type=int, default=8)
    args = ap.parse_args(argv)
    tools = Tools(Path(args.root).resolve())
    client = openai.OpenAI(max_retries=1)
    messages: list[dict] = [
        {"role": "system", "content": "You answer questions about a code base. Use the tools; be concise."},
        {"role": "user", "content": args.question},
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(args.max_turns):
            text, calls = turn(client, args.model, messages)
            if not calls:
                print(text)
                return 0
            messages.append({"role": "assistant", "content": text or None, "tool_calls": [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls]})
            results = pool.map(lambda c: tools.call(c["name"], c["arguments"]), calls)
            for c, result in zip(calls, results, strict=True):
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
    print("gave up after", args.max_turns, "turns", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
