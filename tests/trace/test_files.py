import json

import polars as pl
import pytest

from agentprof import trace
from agentprof.errors import TraceFormatError
from agentprof.trace import JsonlTraceWriter, TraceMeta


def _span(i, **attrs):
    return {"record": "span", "trace_id": "t1", "span_id": f"s{i}", "parent_id": None if i == 0 else "s0",
            "name": f"chat m{i}", "kind": "model" if i else "agent", "start_ns": 1000 * i, "end_ns": 1000 * i + 500,
            "status": "ok", "attributes": {"agentprof.session.id": "sess", **attrs}}


def _write(path, n=3):
    w = JsonlTraceWriter(path)
    w.write_meta(TraceMeta(name="t", tokenizer="cl100k_base"))
    for i in range(n):
        w.write(_span(i, **{"gen_ai.usage.input_tokens": 100 * i, "gen_ai.usage.cache_read.input_tokens": 10 * i,
                            "agentprof.prompt.block_hashes": [1, 2, -3], "custom.thing": "x"}))
    w.close()


def test_roundtrip_jsonl_and_parquet(tmp_path):
    p = tmp_path / "a.jsonl"
    _write(p)
    t = trace.read(p)
    assert t.meta.tokenizer == "cl100k_base"
    df = t.spans
    assert df.height == 3 and df.schema == trace.SCHEMA
    assert df.get_column("input_tokens").to_list() == [0, 100, 200]
    assert df.get_column("block_hashes")[0].to_list() == [1, 2, -3]
    assert json.loads(df.get_column("attributes")[1]) == {"custom.thing": "x"}
    q = trace.write(t, tmp_path / "a.parquet")
    t2 = trace.read(q)
    assert t2.spans.equals(df) and t2.meta.tokenizer == "cl100k_base"
    t3 = trace.read(trace.write(t2, tmp_path / "b.jsonl"))
    assert t3.spans.drop("attributes").equals(df.drop("attributes"))
    assert isinstance(trace.load(p), pl.DataFrame)


def test_truncated_last_line_loads_everything_before(tmp_path):
    p = tmp_path / "cut.jsonl"
    _write(p)
    with open(p, "ab") as f:
        f.write(b'{"record":"span","trace_id":"t1","span_')
    t = trace.read(p)
    assert t.spans.height == 3
    assert any(d.kind == "truncated_last_line" for d in t.diagnostics)


def test_garbage_line_names_file_and_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    _write(p)
    lines = p.read_text().splitlines()
    lines.insert(2, "this is not json")
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError) as e:
        trace.read(p)
    assert f"{p}:3" in str(e.value) and "not valid JSON" in str(e.value)
    t = trace.read(p, skip_bad_lines=True)
    assert t.spans.height == 3
    assert any(d.kind == "skipped_lines" and "1 bad" in d.message for d in t.diagnostics)


def test_wrong_types_are_reported(tmp_path):
    p = tmp_path / "types.jsonl"
    _write(p, 1)
    with open(p, "a") as f:
        f.write(json.dumps({**_span(1), "start_ns": "yesterday"}) + "\n")
    with pytest.raises(TraceFormatError, match=r":3: span field 'start_ns' must be an integer"):
        trace.read(p)


def test_foreign_file_is_refused_with_hint(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"type": "user", "message": {}}\n')
    with pytest.raises(TraceFormatError, match="agentprof import"):
        trace.read(p)
