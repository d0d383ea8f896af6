"""The demo's model as the loopback server plays it: the scripted plan's next turn, sent as a ``Reply``.

The step comes from the request's own messages (see :func:`agentprof.demo.script.next_turn`), so the real
agent loop drives the conversation exactly as it would drive a hosted model.
"""

from __future__ import annotations

from agentprof.demo.model_server import ModelRequest, Reply, ToolCall
from agentprof.demo.script import next_turn


def scripted_reply(req: ModelRequest) -> Reply:
    """The plan's answer to this request: its text and tool calls (JSON arguments)."""
    messages = [m for m in req.body.get("messages") or [] if isinstance(m, dict)]
    turn = next_turn(messages)
    return Reply(text=turn.text, tool_calls=[ToolCall(name, args) for name, args in turn.tool_calls_json()])
