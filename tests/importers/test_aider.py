"""Aider LLM history: verbatim prompts, measured call times and the architect/editor alternation."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import polars as pl

from agentprof.importers.timestamps import iso_to_ns

from .importer_helpers import SAMPLES, imported, kinds, late_prefix_shares

HISTORY = SAMPLES / "aider" / ".aider.llm.history"


def test_calls_and_measured_times():
    text = HISTORY.read_text()
    starts = [iso_to_ns(t) for t in re.findall(r"^TO LLM (\S+)$", text, re.M)]
    ends = [iso_to_ns(t) for t in re.findall(r"^LLM RESPONSE (\S+)$", text, re.M)]
    assert len(starts) == len(ends) == 33
    tr = imported("aider")
    assert kinds(tr.spans)["model"] == 33
    m = tr.spans.filter(pl.col("kind") == "model").sort("start_ns")
    assert m.get_column("start_ns").to_list() == starts and m.get_column("end_ns").to_list() == ends
    assert set(m.get_column("timing").unique()) == {"measured"}
    assert m.get_column("input_tokens").null_count() == 33  # the file has no token counts
    assert kinds(tr.spans)["wait"] == sum(1 for a, b in zip(ends, starts[1:], strict=False) if b > a)


def test_architect_mode_alternation_shows_low_prefix_share():
    """traces.md: median 0.2 % against the previous call (two prompt streams alternate)."""
    m = imported("aider").spans.filter(pl.col("kind") == "model").sort("start_ns")
    shares = late_prefix_shares(m.get_column("block_hashes").to_list())
    assert statistics.median(shares) < 0.05
    # the two streams really alternate: many late calls share more with the call two back
    bh = m.get_column("block_hashes").to_list()
    from agentprof.trace.hashing import common_prefix_blocks
    two_back = [common_prefix_blocks(bh[i - 2], bh[i]) / len(bh[i]) for i in range(11, len(bh))]
    assert sum(1 for a, b in zip(two_back, shares, strict=False) if a > b) >= len(shares) // 3


def test_cache_markers_of_block_printed_messages_are_not_content(tmp_path):
    """With ``--cache-prompts`` (aider 0.86) some messages are content blocks, printed one field per line
    (``type: text`` / ``text: …`` / ``cache_control: {…}``). The text is the content, the marker is not: the
    prompt hashes equal those of the same prompt with plain messages. A request whose response is empty (the
    file ends after ``LLM RESPONSE``) is still a call."""
    from agentprof.importers import load_any
    from agentprof.trace.prompt import PromptHasher, openai_chat_segments

    text = ("TO LLM 2026-05-15T19:06:31\n-------\nSYSTEM Act as an expert software developer.\n"
            "SYSTEM Reply in English.\n-------\nUSER I switched to a new code base.\n-------\n"
            "ASSISTANT type: text\nASSISTANT text: Ok.\nASSISTANT cache_control: {'type': 'ephemeral'}\n-------\n"
            "USER which aider\nUSER aider --version\nLLM RESPONSE 2026-05-15T19:06:34\n\n")
    (tmp_path / "a").mkdir()
    p = tmp_path / "a" / ".aider.llm.history"
    p.write_text(text)
    tr = load_any(p)
    m = tr.spans.filter(pl.col("kind") == "model")
    assert m.height == 1 and (m.row(0, named=True)["end_ns"] - m.row(0, named=True)["start_ns"]) == 3 * 10**9
    plain = [{"role": "system", "content": "Act as an expert software developer.\nReply in English."},
             {"role": "user", "content": "I switched to a new code base."},
             {"role": "assistant", "content": "Ok."},
             {"role": "user", "content": "which aider\naider --version"}]
    fp = PromptHasher(tr.meta.tokenizer).fingerprint(openai_chat_segments(plain))
    assert m.get_column("block_hashes").to_list()[0] == fp.block_hashes
    assert m.get_column("prompt_tokens_hashed").to_list()[0] == fp.tokens


FIXTURES = Path(__file__).parent / "fixtures_other"


def test_multiline_content_block_text_continues_without_role_prefix(tmp_path):
    # Synthetic fixture (fixtures_other/README.md): with --cache-prompts Aider prints a content block one
    # ``ROLE key: value`` line per field, so the later lines of a multi-line text have no role prefix.
    from agentprof.importers import load_any

    blocks = load_any(FIXTURES / "aider-blocks.llm.history", fmt="aider")
    # the same request with the system text as a plain string: one ``SYSTEM line`` per line
    plain = tmp_path / ".aider.llm.history"
    plain.write_text("TO LLM 2025-01-10T10:00:00\n-------\nSYSTEM You are an expert.\nSYSTEM Always reply in "
                     "English.\nSYSTEM \nSYSTEM Use SEARCH/REPLACE blocks.\n-------\nUSER Fix the bug in foo.py\n"
                     "LLM RESPONSE 2025-01-10T10:00:05\nASSISTANT Done.\n")
    ref = load_any(plain, fmt="aider")
    mb = blocks.spans.filter(pl.col("kind") == "model")
    mr = ref.spans.filter(pl.col("kind") == "model")
    assert mb.height == mr.height == 1
    assert not [d for d in blocks.diagnostics if d.kind == "bad_line"]
    # the cache marker is not content, the continuation lines are: the prompts hash identically
    assert mb.get_column("block_hashes").to_list() == mr.get_column("block_hashes").to_list()
    assert mb.get_column("prompt_tokens_hashed").item() == mr.get_column("prompt_tokens_hashed").item() > 10
