"""Attribute and span-name constants: OpenTelemetry GenAI semantic conventions v1.41 plus ``agentprof.*``.

Kept as plain strings (not imported from ``opentelemetry.semconv._incubating``, which is deprecated) so the
names agentprof writes stay fixed whatever OTel release is installed.
"""

from __future__ import annotations

# --- GenAI semantic conventions (v1.41) -------------------------------------------------------------
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"  # opt-in content
TOOL_CALL_RESULT = "gen_ai.tool.call.result"  # opt-in content
INPUT_MESSAGES = "gen_ai.input.messages"  # opt-in content
OUTPUT_MESSAGES = "gen_ai.output.messages"  # opt-in content
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"
OP_INVOKE_AGENT = "invoke_agent"

# --- agentprof's own attributes ----------------------------------------------------------------------
KIND = "agentprof.kind"  # agent | model | tool | parse | orchestration | wait
SESSION_ID = "agentprof.session.id"
PARENT_SESSION_ID = "agentprof.session.parent_id"
SESSION_ROLE = "agentprof.session.role"  # main | subagent | compaction | attempt
TIMING = "agentprof.timing"  # measured | derived | unknown
CPU_NS = "agentprof.cpu_ns"  # CPU time (thread or child process) spent inside the span
CHILD_CPU_NS = "agentprof.cpu.children_ns"  # of CPU_NS, the child processes' part (not on the span's thread)
RUNQ_NS = "agentprof.runq_ns"  # time the thread was runnable but waiting for a CPU (Linux schedstat): the run on
# the root span; a CPU-measured or model span its own, where no stack sampler ran (samples carry it then)
CPU_BOUND = "agentprof.cpu_bound"  # declared CPU-bound share of a span's own time: true/false or 0..1 (replay)
PROMPT_BLOCK_HASHES = "agentprof.prompt.block_hashes"  # list[int] signed int64, chained xxh3_64
PROMPT_TOKENS = "agentprof.prompt.tokens"  # tokens the hashes were computed over (tail included)
PROMPT_SEGMENTS = "agentprof.prompt.segments"  # JSON string: [{kind, role, tokens, hash}]
WAIT_REASON = "agentprof.wait.reason"  # user_turn | approval | idle | retry | residue | sleep (agentprof.trace.waits)
PARSE_BYTES = "agentprof.parse.bytes"
PARSE_PARTIAL = "agentprof.parse.partial"  # a library's partial-JSON attempt (streamed arguments): complete | incomplete
SUBPROCESS_ARGS = "agentprof.subprocess.args"  # opt-in content
SUBPROCESS_RETURNCODE = "agentprof.subprocess.returncode"
STREAM_CHUNKS = "agentprof.stream.chunks"  # chunks/events received by a streamed model call
INCOMPLETE = "agentprof.incomplete"  # span closed when its session ended (stream not consumed, process not waited)
HTTP_STATUS_CODE = "http.response.status_code"


def model_span_name(model: str | None) -> str:
    """``chat {model}`` (or plain ``chat``) as the conventions name an inference span."""
    return f"{OP_CHAT} {model}" if model else OP_CHAT


def tool_span_name(tool: str) -> str:
    return f"{OP_EXECUTE_TOOL} {tool}"


def agent_span_name(agent: str | None) -> str:
    return f"{OP_INVOKE_AGENT} {agent}" if agent else OP_INVOKE_AGENT


# --- what receivers (Phoenix, Langfuse) group and classify spans by -----------------------------------------
RECEIVER_SESSION_ID = "session.id"
OPENINFERENCE_KIND = "openinference.span.kind"
OPENINFERENCE_KINDS = {"agent": "AGENT", "model": "LLM", "tool": "TOOL", "parse": "CHAIN", "orchestration": "CHAIN",
                       "wait": "CHAIN"}
"""agentprof span kind -> OpenInference span kind (parsing, orchestration and waits are steps of the agent's own
code: CHAIN, OpenInference's kind for that)."""


def receiver_attributes(attrs: dict, session_id: str | None = None, kind: str | None = None) -> dict:
    """The attributes a receiver needs that ``attrs`` lacks: ``session.id`` and ``gen_ai.conversation.id`` (the
    session, from ``session_id`` or ``agentprof.session.id``) and ``openinference.span.kind`` (from ``kind`` or
    ``agentprof.kind``). Empty when there is nothing to add."""
    extra: dict = {}
    sid = session_id if session_id is not None else attrs.get(SESSION_ID)
    if sid is not None:
        if RECEIVER_SESSION_ID not in attrs:
            extra[RECEIVER_SESSION_ID] = sid
        if CONVERSATION_ID not in attrs:
            extra[CONVERSATION_ID] = sid
    oi = OPENINFERENCE_KINDS.get(str(kind if kind is not None else attrs.get(KIND)))
    if oi is not None and OPENINFERENCE_KIND not in attrs:
        extra[OPENINFERENCE_KIND] = oi
    return extra
