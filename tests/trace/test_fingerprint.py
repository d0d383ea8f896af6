"""The incremental fingerprinter gives exactly PromptHasher.fingerprint's result, in any call order."""

from __future__ import annotations

import json
import random

from agentprof.trace.fingerprint import IncrementalFingerprinter
from agentprof.trace.prompt import PromptHasher, Segment, openai_chat_segments

from ..importers.importer_helpers import SAMPLES


def test_equal_to_full_fingerprints_on_a_real_session_in_and_out_of_order():
    doc = json.loads((SAMPLES / "mini-swe-agent" / "django__django-13807.traj.json").read_text())
    msgs = [{"role": m["role"], "content": m["content"]} for m in doc["messages"]]
    prompts = [openai_chat_segments(msgs[:i]) for i, m in enumerate(msgs) if m["role"] == "assistant"]
    full = PromptHasher(block_size=16)
    want = [full.fingerprint(p) for p in prompts]
    order = list(range(len(prompts)))
    for shuffled in (False, True):
        if shuffled:
            random.Random(7).shuffle(order)
        inc = IncrementalFingerprinter(PromptHasher(block_size=16))
        for i in order:
            got = inc.fingerprint(prompts[i])
            assert (got.block_hashes, got.tokens, got.segments) == \
                (want[i].block_hashes, want[i].tokens, want[i].segments)


def test_a_changed_early_segment_rehashes_from_there():
    h = PromptHasher(block_size=8)
    inc = IncrementalFingerprinter(h)
    base = [Segment("system", "system", "system: " + "rules " * 40),
            Segment("message", "user", "user: " + "task " * 40)]
    inc.fingerprint(base)
    edited = [base[0], Segment("message", "user", "user: " + "task " * 39 + "other"),
              Segment("message", "assistant", "assistant: ok")]
    assert inc.fingerprint(edited).block_hashes == h.fingerprint(edited).block_hashes
