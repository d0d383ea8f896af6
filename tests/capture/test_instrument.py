"""SDK instrumentation: idempotent class-level patches, tolerant of SDK layouts, installed lazily on import."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import openai
import pydantic
from openai.resources.chat.completions.completions import AsyncCompletions, Completions

import agentprof
from agentprof.capture import instrument
from agentprof.capture.sdk_patch import ORIGINAL, patch_method, wrap_request
from agentprof.demo.model_server import ModelServer, Reply

from .capture_helpers import load, of_kind


def test_patches_are_idempotent(tmp_path):
    with agentprof.profile("p", out=tmp_path):
        pass
    instrument.ensure()
    first = Completions.create
    original = getattr(first, ORIGINAL)
    assert patch_method(Completions, "create", lambda o: wrap_request(o, "openai", "chat"))
    assert Completions.create is first and getattr(Completions.create, ORIGINAL) is original
    assert getattr(AsyncCompletions.create, ORIGINAL) is not None
    assert "Completions.create" in instrument.PATCHED[instrument.openai_sdk.CHAT_MODULE]


def test_missing_methods_are_skipped():
    class OldResource:
        def create(self, **kw):
            return kw

    assert patch_method(OldResource, "parse", lambda o: o) is False
    assert patch_method(OldResource, "create", lambda o: wrap_request(o, "openai", "chat")) is True
    assert OldResource().create(model="m") == {"model": "m"}  # no profile: straight through


def test_parse_helper_is_recorded(tmp_path):
    class Answer(pydantic.BaseModel):
        answer: int

    with ModelServer(script=lambda req: Reply(text='{"answer": 3}')) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="t", max_retries=0)
        with agentprof.profile("parse", out=tmp_path) as run:
            done = client.chat.completions.parse(model="m", messages=[{"role": "user", "content": "1+2"}],
                                                 response_format=Answer)
        log = list(server.log)
    assert done.choices[0].message.parsed == Answer(answer=3)
    (model,) = of_kind(load(run.path)[1], "model")
    assert model["input_tokens"] == log[0].prompt_tokens and model["output_tokens"] == log[0].output_tokens


def test_sdk_imported_after_profile_start_and_no_polars(tmp_path):
    """In a fresh process: the SDK is patched when first imported, and capture never loads polars."""
    with ModelServer(script=lambda req: Reply(text="ok")) as server:
        code = textwrap.dedent(f"""
            import sys
            import agentprof
            with agentprof.profile("late", out={str(tmp_path)!r}):
                assert "openai" not in sys.modules
                import openai
                client = openai.OpenAI(base_url={server.openai_base_url!r}, api_key="t", max_retries=0)
                client.chat.completions.create(model="m", messages=[{{"role": "user", "content": "hi"}}])
                agentprof.parse_json("[1]")
            print("polars" in sys.modules)
        """)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
    (path,) = tmp_path.glob("late-*.jsonl")
    _, rows = load(path)
    assert [r["kind"] for r in rows] == ["agent", "model", "parse"]
    assert rows[1]["input_tokens"] > 0 and rows[1]["block_hashes"] is not None
