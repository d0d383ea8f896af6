"""Prompt text that reproduces a trace's prefix reuse, from block hashes alone (no recorded text is needed or sent).

Each distinct prompt block (a node of the plan: the same id means the same tokens through that block) becomes
``block_size`` words drawn by a generator seeded with the node id, so the same block is the same text and a new
block is new text; each run draws its own ``salt``, so a run never hits blocks an earlier run left in the
server's cache. A call's prompt is its blocks in order plus a tail that starts the block its session's next
call adds (as an agent's appended turn does), cut to the recorded prompt length less the server's chat-template
tokens. The words are common lowercase English words, each one token with its leading space in cl100k
(checked); BPE pre-tokenizers split before a space, so the text is ``block_size`` tokens per block and block
boundaries stay where the trace has them. For other vocabularies that is an assumption: ``check_words``
verifies it against a local tokenizer, :func:`agentprof.loadtest.run.probe_tokenize` against the server's own
``/tokenize``, and the run reports the prompt-token drift the server's usage shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentprof.errors import AgentprofError
from agentprof.replay.serving import SessionPlan

_WORD_TEXT = """
    the of and to in is that for it as was with be by on not he this are or his from at which but have an they
    you were her she there had been one all we can has more will if no would so what its up out who them some
    than into only other time new could these may then do any now my such like our over also me even most made
    after did many well where must back years much your way down should each just those how too good very make
    world still own see men work long here get both life being under never know same last while might great old
    year off come since go came right used take three few house use during again place around home small found
    went say part once high upon school every does got united left number course war until always away fact
    though water less public put think almost hand enough far took head yet system better set told night end why
    called find look going asked point later knew next city give group toward young days let room side social
    given order second rather per face among form often things early white case john become large big need four
    within felt along saw best church ever least power light thing seemed family want mind area others done
    turned open god kind began door thus help sense means whole matter itself york times law human line above
    name action hands local show five gave either act feet across past quite taken having seen death body word
    half really week field car words tell shall money period held keep sure free seems real behind cannot miss
    air making office whose heard major ago became moment study known result street boy reason change south
    board job areas west close turn love true court force full
"""
WORDS: tuple[str, ...] = tuple(_WORD_TEXT.split())
"""One-token words (each one token with its leading space in cl100k_base; 2 to 6 letters)."""


def check_words(tokenizer: Any, block_size: int, words: tuple[str, ...] = WORDS) -> tuple[str, ...]:
    """The words that are one token for ``tokenizer`` (``encode(text) -> ids``), checked again as a whole
    block; a clear error when too few are left to make distinct blocks."""
    kept = tuple(w for w in words if len(tokenizer.encode(" " + w)) == 1)
    if len(kept) < 16:
        raise AgentprofError(f"tokenizer {getattr(tokenizer, 'name', tokenizer)} keeps only {len(kept)} of the "
                             f"{len(words)} synthetic words as one token: prompts cannot match recorded lengths")
    sample = "".join(" " + kept[i % len(kept)] for i in range(block_size * 4))
    n = len(tokenizer.encode(sample))
    if n != block_size * 4:
        raise AgentprofError(f"tokenizer {getattr(tokenizer, 'name', tokenizer)} reads {block_size * 4} synthetic "
                             f"one-token words as {n} tokens: block boundaries would drift")
    return kept


@dataclass
class PromptSynth:
    """Prompt text per call of ``plan`` (see the module docstring); ``overhead`` tokens (the server's chat
    template) are left out of the text so the server counts the recorded length."""

    plan: SessionPlan
    words: tuple[str, ...] = WORDS
    overhead: int = 0
    salt: int = 0  # a run's own text: another salt shares no block with this one
    _blocks: dict[int, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not all(w.isascii() and w.isalpha() and w.islower() for w in self.words):
            raise AgentprofError("synthetic prompt words must be lowercase ASCII letters")  # sent unescaped
        self._pieces = np.array([" " + w for w in self.words], dtype=object)

    def warm(self) -> None:
        """Make every block's text now, so the run's clock never waits for it."""
        for n in np.unique(self.plan.node_ids).tolist():
            self.block(n)

    def _words(self, seed: tuple[int, ...], n: int) -> str:
        rng = np.random.default_rng(list(seed))
        return "".join(self._pieces[rng.integers(0, len(self._pieces), n)].tolist())

    def block(self, node: int) -> str:
        """The text of one prompt block (``block_size`` words), the same for the same node."""
        t = self._blocks.get(node)
        if t is None:
            t = self._blocks[node] = self._words((1, self.salt, node), self.plan.block_size)
        return t

    def nodes(self, call: int) -> np.ndarray:
        p = self.plan
        return p.node_ids[p.node_offsets[call]:p.node_offsets[call + 1]]

    def text_tokens(self, call: int) -> int:
        """Tokens of text the call's prompt carries: the recorded prompt less the template's tokens (at least 1)."""
        return max(int(self.plan.input_tokens[call]) - self.overhead, 1)

    def prompt(self, call: int, next_call: int | None = None) -> str:
        """The prompt text of plan call ``call``; ``next_call`` is its session's next sent call, whose new block
        the tail begins."""
        bs = self.plan.block_size
        want = self.text_tokens(call)
        nodes = self.nodes(call)
        k = min(nodes.size, want // bs)
        parts = [self.block(int(n)) for n in nodes[:k].tolist()]
        tail = want - k * bs
        if tail:
            nxt = self.nodes(next_call) if next_call is not None else None
            if nxt is not None and nxt.size > k and np.array_equal(nxt[:k], nodes[:k]):
                take = min(tail, bs)
                parts.append(" " + " ".join(self.block(int(nxt[k])).split()[:take]))
                tail -= take
            if tail:
                parts.append(self._words((2, self.salt, call), tail))
        return "".join(parts)


def probe_words(words: tuple[str, ...], n: int) -> str:
    """``n`` of the words in a fixed order (for measuring how a server tokenizes them)."""
    return "".join(" " + words[(i * 7) % len(words)] for i in range(n))
