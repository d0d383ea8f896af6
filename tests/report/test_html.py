"""The HTML file itself: one self-contained page, escaped trace text, a strict CSP, a bounded size and a
report that says what is missing instead of breaking."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re

from agentprof.report.html import embed_json, render, write_report
from agentprof.report.payload import build_payload

from .report_support import SEC, T0, make_trace, span, synthetic_session

EVIL_TOOL = "<script>alert(1)</script>"
EVIL_SESSION = "</script><script>alert(2)</script>"
EVIL_MODEL = '"><img src=x onerror=alert(3)>'
MAX_REPORT_BYTES = 3_000_000


def evil_trace():
    recs = [span(EVIL_SESSION, "a", None, "agent", "invoke_agent " + EVIL_TOOL, T0, T0 + 60 * SEC),
            span(EVIL_SESSION, "m", "a", "model", "chat " + EVIL_MODEL, T0, T0 + 5 * SEC,
                 **{"gen_ai.response.model": EVIL_MODEL, "gen_ai.usage.input_tokens": 100,
                    "gen_ai.input.messages": "<b>prompt</b> & </script>"}),
            span(EVIL_SESSION, "t", "a", "tool", "execute_tool " + EVIL_TOOL, T0 + 5 * SEC, T0 + 40 * SEC,
                 status="error", **{"gen_ai.tool.name": EVIL_TOOL})]
    return make_trace(recs, name="/home/USER/<evil>.jsonl", capture_overhead_ns=123_000_000)


def _data(page: str) -> dict:
    m = re.search(r'<script id="agentprof-data" type="application/json">(.*?)</script>', page, re.S)
    assert m
    return json.loads(m.group(1))


def test_trace_text_cannot_leave_the_data_block():
    page = render(evil_trace(), include_text=True)
    # exactly two script elements (the data and the page script) and no injected markup
    assert len(re.findall(r"<script\b", page)) == 2
    assert "<img" not in page and "<b>prompt" not in page
    assert "&lt;evil&gt;" in page.split("</title>")[0]  # the title is HTML-escaped
    data = _data(page)
    assert EVIL_TOOL in [t["tool"] for t in data["slow"]["tools"]]
    co = data["meta"]["capture"]  # the analysis' own figure: no background thread recorded, so the total is it
    assert co["s"] == co["total_s"] == 0.123 and co["background_cpu_s"] is None
    f = data["slow"]["failures"]
    assert (f["model_calls"], f["tool_calls"], f["tool_s"]) == (0, 1, 35.0)
    assert f["by_error_type"] == [{"kind": "tool", "error_type": "ToolError", "count": 1, "time_s": 35.0}]
    assert data["timeline"]["sessions"][0]["id"] == EVIL_SESSION
    assert data["timeline"]["text"]["input"] == ["<b>prompt</b> & </script>"]


def test_embed_json_escapes_what_html_would_parse():
    s = embed_json({"a": "</script><!-- \u2028 & >", "n": math.nan, "i": [math.inf, 1.5]})
    assert "<" not in s and ">" not in s and "&" not in s and "\u2028" not in s
    assert json.loads(s) == {"a": "</script><!-- \u2028 & >", "n": None, "i": [None, 1.5]}


def test_csp_allows_only_the_page_script_and_no_network():
    page = render(synthetic_session())
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src 'none'" in csp and "connect-src 'none'" in csp
    script = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(script) == 1
    digest = base64.b64encode(hashlib.sha256(script[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp
    # nothing refers to another resource: no src/href/url() pointing anywhere, no imports
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:|//)""", page)
    assert not re.search(r"url\(\s*['\"]?(?:https?:|//)", page) and "@import" not in page


def test_reports_of_the_shared_traces_stay_small(big_session, kv_folder, tmp_path):
    for name, trace in (("cc", big_session), ("kv", kv_folder)):
        out = write_report(tmp_path / f"{name}.html", trace)
        size = out.stat().st_size
        assert 10_000 < size <= MAX_REPORT_BYTES, (name, size)
        tl = _data(out.read_text())["timeline"]
        assert tl["aggregated"]["span"] == []  # small enough to ship every span
        assert len(tl["spans"]["start_delta"]) + tl["n_untimed"] == trace.spans.filter(trace.spans["kind"] != "agent").height


def test_prompt_text_is_left_out_unless_opted_in():
    page = render(evil_trace())
    assert "prompt</b>" not in page and "\\u003cb\\u003eprompt" not in page
    assert "text" not in _data(page)["timeline"]


def test_missing_pieces_are_named_not_fatal():
    recs = [span("s", "a", None, "agent", "invoke_agent x", None, None),
            span("s", "m1", "a", "model", "chat m", None, None),
            span("s", "t1", "a", "tool", "execute_tool Bash", None, None)]
    payload = build_payload(make_trace(recs), notes={"replay": "pass --system"})
    text = " ".join(payload["missing"])
    assert "No span has usable start and end times" in text
    assert "No model call reports provider token usage" in text
    assert "No model call carries prompt block hashes" in text
    assert "Replay: pass --system" in text
    assert payload["redundancy"]["status"] == "missing" and payload["whatif"]["status"] == "missing"
    assert payload["headline"]["wall_s"] is None and payload["headline"]["input_tokens"] is None
    page = render(make_trace(recs))
    assert _data(page)["timeline"]["spans"]["start_delta"] == []


def test_stage_results_with_nan_still_give_valid_json():
    analysis = {"sessions": 1, "model_calls": 1, "time": {"wall_s": 10.0, "model_s": math.nan, "tool_s": 2.0},
                "redundancy": {"prefix_reuse_prev": {"mean": math.nan}}, "cache_misses": [], "per_session": []}
    data = _data(render(synthetic_session(), analysis=analysis))
    assert data["headline"]["time"]["model_s"] is None and data["headline"]["time"]["tool_s"] == 2.0
