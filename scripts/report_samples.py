"""The bundled real sessions the report is measured and pictured on: ``bench_report.py`` times ``agentprof
report`` on them and ``report_screenshots.py --docs`` takes their first screens (one list, the same inputs)."""

from __future__ import annotations

from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[1] / "traces" / "samples"
REPORT_SAMPLES: dict[str, list[Path]] = {
    # the largest bundled Claude Code session with its subagent and compaction segments
    "claude-code": [SAMPLES / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl",
                    SAMPLES / "claude-code" / "258c7280-ae70-4798-800f-63464d01a85d"],
    "kv-cache-tester": [SAMPLES / "kv-cache-tester"],  # the whole folder (19 traces)
}
"""Name (the screenshots' file names) -> the files and folders ``agentprof report`` is given."""
