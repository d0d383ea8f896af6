"""``parse_json`` and the opt-in ``json.loads`` instrumentation."""

from __future__ import annotations

import json

import openai
import pytest

import agentprof
from agentprof.capture import json_patch

from .capture_helpers import attrs, load, of_kind


def test_parse_json_records_bytes_and_errors(tmp_path):
    doc = json.dumps({"city": "Zürich", "n": list(range(50))}, ensure_ascii=False)
    with agentprof.profile("parse", out=tmp_path) as run:
        assert agentprof.parse_json(doc, name="weather") == json.loads(doc)
        assert agentprof.parse_json(doc.encode()) == json.loads(doc)
        with pytest.raises(json.JSONDecodeError):
            agentprof.parse_json('{"broken": ', name="bad")
    _, rows = load(run.path)
    parses = of_kind(rows, "parse")
    assert [p["name"] for p in parses] == ["weather", "parse_json", "bad"]
    assert [attrs(p)["agentprof.parse.bytes"] for p in parses] == [len(doc.encode()), len(doc.encode()), 11]
    assert len(doc.encode()) > len(doc)  # the ü counts two bytes
    assert parses[2]["status"] == "error" and parses[2]["error_type"] == "json.decoder.JSONDecodeError"


def test_instrument_json_records_agent_calls_only(tmp_path, server):
    original = json.loads
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
    with agentprof.profile("json", out=tmp_path, instrument_json=True) as run:
        assert json.loads is not original
        json.loads('{"a": 1}')
        json.loads(b"[1, 2, 3]")
        # the SDK decodes the response (and its own JSON) internally: not the agent's parsing
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        agentprof.parse_json('{"b": 2}')  # recorded once, not twice
    assert json.loads is original
    _, rows = load(run.path)
    parses = of_kind(rows, "parse")
    assert [p["name"] for p in parses] == ["json.loads", "json.loads", "parse_json"]
    assert [attrs(p)["agentprof.parse.bytes"] for p in parses] == [8, 9, 8]


def test_instrument_json_nested_and_off(tmp_path):
    original = json.loads
    with agentprof.profile("outer", out=tmp_path / "a") as plain_run:
        json.loads("{}")  # not instrumented: this profile did not ask
        with agentprof.profile("inner", out=tmp_path / "b", instrument_json=True) as inner:
            json.loads("{}")
        assert json.loads is original
        json.loads("{}")
    assert json_patch.LOADS.count == 0
    assert len(of_kind(load(inner.path)[1], "parse")) == 1
    assert len(of_kind(load(plain_run.path)[1], "parse")) == 1  # the inner session's span, copied outward
