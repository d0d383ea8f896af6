"""The real public agent traces the demo can set beside its captured run (files under ``traces/samples/``).

Provenance and licences of every file: ``traces/samples/SOURCES.md``. The samples ship with the repository
and an installed wheel carries the demo's ones (``agentprof.resources``): looked up next to the package, then
under the working folder, then in the wheel's bundled copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentprof.errors import AgentprofError


@dataclass(frozen=True)
class Sample:
    """One bundled real session: what it is, and its files relative to ``traces/samples/``."""

    key: str
    label: str
    files: tuple[str, ...]
    about: str


SAMPLES: dict[str, Sample] = {s.key: s for s in (
    Sample("codex", "real Codex CLI session (imported)",
           ("codex/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",),
           "a codex-tui 0.125.0 session (gpt-5 family): shell commands and patches with durations the agent "
           "measured itself; from codemie-ai/codemie-code (Apache-2.0)"),
    Sample("claude-code", "real Claude Code session (imported)",
           ("claude-code/258c7280-ae70-4798-800f-63464d01a85d.jsonl",
            "claude-code/258c7280-ae70-4798-800f-63464d01a85d/"),
           "a Claude Code 2.1.39 session (claude-opus-4-6) with its subagent and compaction segments; tool "
           "times inferred from the log's timestamps; from marot/spotter (MIT)"),
)}
DEFAULT_SAMPLE = "codex"


def samples_root() -> Path:
    """``traces/samples`` of the repository agentprof is installed from, else of the working folder, else the
    copy bundled in the wheel."""
    from agentprof import resources

    root = resources.find("traces/samples")
    if root is not None and root.is_dir():
        return root
    raise AgentprofError(f"the bundled sample traces are not here ({resources.BUNDLED / 'traces' / 'samples'}); "
                         "pass --sample PATH with a trace of your own")


def sample_paths(sample: Sample) -> list[Path]:
    """The sample's files, checked to exist."""
    root = samples_root()
    paths = [root / f for f in sample.files]
    for p in paths:
        if not p.exists():
            raise AgentprofError(f"{p}: bundled sample trace missing (see traces/samples/SOURCES.md)")
    return paths
