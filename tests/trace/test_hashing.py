import xxhash

from agentprof.trace.hashing import chain_hashes, coarsen, common_prefix_blocks, to_signed, to_unsigned


def test_chain_matches_definition():
    toks = list(range(200))
    hs = chain_hashes(toks, 64)
    assert len(hs) == 3  # 200 // 64, tail unhashed
    prev = (0).to_bytes(8, "little")
    for i, h in enumerate(hs):
        block = b"".join(t.to_bytes(4, "little") for t in toks[i * 64 : (i + 1) * 64])
        expect = xxhash.xxh3_64_intdigest(prev + block)
        assert to_unsigned(h) == expect
        prev = expect.to_bytes(8, "little")


def test_equal_prefix_equal_hashes_and_divergence_is_final():
    a = list(range(1000))
    b = a[:640] + [7] + a[641:]
    ha, hb = chain_hashes(a, 64), chain_hashes(b, 64)
    assert ha[:10] == hb[:10]
    assert all(x != y for x, y in zip(ha[10:], hb[10:], strict=True))
    assert common_prefix_blocks(ha, hb) == 10
    assert common_prefix_blocks(ha, ha[:5]) == 5
    assert common_prefix_blocks([], ha) == 0


def test_continuation_with_seed_equals_full_chain():
    toks = list(range(512))
    full = chain_hashes(toks, 64)
    first = chain_hashes(toks[:256], 64)
    rest = chain_hashes(toks[256:], 64, seed=first[-1])
    assert first + rest == full


def test_coarsen_keeps_prefix_identity():
    hs = chain_hashes(list(range(2048)), 64)
    assert coarsen(hs, 8) == [hs[7], hs[15], hs[23], hs[31]]


def test_signed_roundtrip():
    for u in (0, 1, 2**63 - 1, 2**63, 2**64 - 1):
        assert to_unsigned(to_signed(u)) == u
        assert -(2**63) <= to_signed(u) < 2**63


def test_chain_hasher_reuses_the_shared_prefix_and_equals_chain_hashes():
    import random

    from agentprof.trace.hashing import ChainHasher

    rng = random.Random(7)
    prompt = [rng.randrange(100_000) for _ in range(3000)]
    h = ChainHasher(64)
    prompts = [prompt]
    for _ in range(6):  # grow, edit in the middle, truncate
        p = list(prompts[-1]) + [rng.randrange(100_000) for _ in range(rng.randrange(10, 900))]
        prompts.append(p)
    prompts.append(prompts[-1][:1000] + [1, 2, 3] + prompts[-1][1003:])
    prompts.append(prompts[-1][:500])
    prompts.append([])
    for p in prompts:
        assert h.hashes(p) == chain_hashes(p, 64)
    assert h.hashed_blocks < sum(len(p) // 64 for p in prompts) / 2
