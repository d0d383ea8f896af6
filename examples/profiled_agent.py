"""The same kind of agent with agentprof's API in the code: ``@agentprof.profile`` on the entry point,
``@agentprof.tool`` on the tools. Uses the ``anthropic`` SDK (recorded automatically inside the profile).

    ANTHROPIC_BASE_URL=... ANTHROPIC_API_KEY=... python examples/profiled_agent.py --root agentprof/trace
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import anthropic

import agentprof

ROOT = Path(".")
TOOLS = [
    {"name": "search", "description": "Lines matching a regular expression, as path:line: text.",
     "input_schema": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}},
    {"name": "read_file", "description": "Read one file (path relative to the root).",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
]
SYSTEM = [{"type": "text", "text": "You answer questions about a code base. Use the tools; be concise.",
           "cache_control": {"type": "ephemeral"}}]


@agentprof.tool
def search(pattern: str) -> str:
    rx = re.compile(pattern)
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in sorted(ROOT.rglob("*.py"))
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if rx.search(line)]
    return "\n".join(hits[:200]) or "no matches"


@agentprof.tool
def read_file(path: str) -> str:
    return (ROOT / path).read_text(errors="replace")[:8000]


@agentprof.profile(out=os.environ.get("AGENTPROF_OUT", "traces/"))
def answer(question: str, model: str, max_turns: int = 8) -> str | None:
    client = anthropic.Anthropic(max_retries=1)
    messages: list[dict] = [{"role": "user", "content": question}]
    registry = {"search": search, "read_file": read_file}
    for _ in range(max_turns):
        with client.messages.stream(model=model, max_tokens=1024, system=SYSTEM, tools=TOOLS,
                                    messages=messages) as stream:
            message = stream.get_final_message()
        content = [b.model_dump(exclude_none=True) for b in message.content]
        messages.append({"role": "assistant", "content": content})
        uses = [b for b in content if b["type"] == "tool_use"]
        if not uses:
            return "".join(b.get("text", "") for b in content)
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": u["id"], "content": registry[u["name"]](**u["input"])} for u in uses]})
    return None


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="Answer a question about a code base with tools.")
    ap.add_argument("--root", default=".")
    ap.add_argument("--question", default="Where is the trace file writer, and is it crash-safe?")
    ap.add_argument("--model", default=os.environ.get("AGENT_MODEL", "claude-sonnet-4-6"))
    a = ap.parse_args()
    ROOT = Path(a.root).resolve()
    result = answer(a.question, a.model)
    print(result)
    sys.exit(0 if result is not None else 1)
