"""Synthetic prompts: the same block is the same text, new blocks are new text, lengths are as recorded."""

from __future__ import annotations

import pytest

from agentprof.demo.model_server import count_pieces
from agentprof.errors import AgentprofError
from agentprof.loadtest.prompts import WORDS, PromptSynth, check_words
from agentprof.loadtest.workload import prepare
from agentprof.trace.tokenizer import get_tokenizer


@pytest.fixture(scope="module")
def synth(four_sessions):
    return PromptSynth(prepare(four_sessions, max_calls=3).plan)


def test_every_prompt_has_the_recorded_length_in_tokens(synth):
    plan = synth.plan
    enc = get_tokenizer("cl100k")
    for c in range(plan.n_calls):
        text = synth.prompt(c)
        assert len(count_pieces(text)) == int(plan.input_tokens[c])
    assert len(enc.encode(synth.prompt(0))) == int(plan.input_tokens[0])  # and for cl100k


def test_shared_blocks_are_the_same_text_and_new_blocks_are_not(synth):
    plan, bs = synth.plan, synth.plan.block_size
    a, b = synth.prompt(0, 1).split(), synth.prompt(1).split()  # calls 0 and 1 of the first session
    n0, n1 = synth.nodes(0), synth.nodes(1)
    k = 0
    while k < min(n0.size, n1.size) and n0[k] == n1[k]:
        k += 1
    assert k > 0
    assert a[: k * bs] == b[: k * bs]
    if k < n0.size:  # a block the next call changed is other text there
        assert a[k * bs:(k + 1) * bs] != b[k * bs:(k + 1) * bs]
    else:  # the first call's tail starts the block the second call adds
        tail = a[n0.size * bs:]
        assert tail and tail == b[n0.size * bs: n0.size * bs + len(tail)]
    # another session's first block is other text
    other = plan.start[1]
    assert synth.prompt(int(other)).split()[:bs] != a[:bs]


def test_template_tokens_come_off_the_text(four_sessions):
    plan = prepare(four_sessions, max_calls=1).plan
    s = PromptSynth(plan, overhead=12)
    assert len(count_pieces(s.prompt(0))) == int(plan.input_tokens[0]) - 12


def test_words_are_checked_against_a_tokenizer():
    assert len(check_words(get_tokenizer("cl100k"), 64)) == len(WORDS)

    class Letters:  # a tokenizer that reads every letter as a token
        name = "letters"

        def encode(self, text: str) -> list[int]:
            return [ord(ch) for ch in text]

    with pytest.raises(AgentprofError, match="one token"):
        check_words(Letters(), 64)
