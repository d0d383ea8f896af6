"""The mean number of engine iterations a new request's context phase is held by TensorRT-LLM's attention-DP
balance (:mod:`agentprof.catalog.adpbalance`), for Poisson arrivals.

The engine's rule (docs/SOURCES.md [S59]): while not every one of the ``g`` attention ranks has a context request
waiting, a counter counts iterations and, when it reaches ``timeout`` (P), everything waiting is scheduled; once
every rank has one (and every rank is decoding), the requests wait ``batching`` (B) more iterations, then all are
scheduled together. New requests go to the ranks in turn, so every rank has one at the g-th arrival after a
schedule. A cycle starts at a schedule; with ``lam`` arrivals per iteration over the instance and S_g the g-th
arrival time (Gamma(g, lam)):

- S_g < P: the cycle ends at S_g + B. Given S_g = s, the first g - 1 arrivals are uniform on [0, s] and wait
  s - t + B, the g-th waits B, and the lam·B arrivals during the hold wait B/2 on average.
- S_g >= P: the n < g arrivals of [0, P) (Poisson(lam·P) below g) wait until P, P/2 on average.

The mean wait per request is the expected total wait of a cycle over its expected arrivals (renewal reward), in
closed form through Poisson tails. Decode-sized iterations, so the caller multiplies by the decode step. The
requests a cycle schedules run their context phase in one iteration, so each one's first token also waits for the
others' prompts (:func:`adp_released_with`)."""

from __future__ import annotations


def adp_hold_iters(ranks: int, lam: float, timeout: float, batching: float) -> float:
    """Mean iterations a new request waits before its context phase is scheduled (see the module docstring):
    ``ranks`` attention-DP ranks, ``lam`` new requests per iteration over the instance, the balance's
    ``timeout`` and ``batching`` counts. 0 without arrivals."""
    g = max(int(ranks), 1)
    if lam <= 0.0:
        return 0.0
    # imported here, not with the module: only data-parallel attention needs it, and it costs a report ~1 s
    from scipy.stats import poisson

    m = lam * timeout                       # expected arrivals before the timeout fires
    p_all = float(poisson.sf(g - 1, m))     # P(S_g < P): every rank has a request before the timeout
    s_mean = g / lam * float(poisson.sf(g, m))  # E[S_g; S_g < P]
    total = (g - 1) / 2.0 * s_mean + (g * batching + lam * batching ** 2 / 2.0) * p_all
    n_timeout = m * float(poisson.cdf(g - 2, m)) if g >= 2 else 0.0  # E[n; n < g] arrivals that wait for P
    total += timeout / 2.0 * n_timeout
    arrivals = (g + lam * batching) * p_all + n_timeout
    return total / arrivals if arrivals > 0 else 0.0


def adp_released_with(ranks: int, lam: float, timeout: float, batching: float) -> float:
    """Mean number of other requests whose context phase a new request's iteration runs beside its own, under the
    balance of :func:`adp_hold_iters` (same arguments): a cycle schedules N requests at once, and a request is in a
    cycle of N with probability proportional to N, so the mean is E[N²]/E[N] − 1 over cycles (renewal reward). N is
    g plus the Poisson(lam·B) arrivals of the batching wait when every rank fills before the timeout, else the
    Poisson(lam·P) arrivals below g. 0 without arrivals."""
    g = max(int(ranks), 1)
    if lam <= 0.0:
        return 0.0
    from scipy.stats import poisson

    m, lb = lam * timeout, lam * batching
    p_all = float(poisson.sf(g - 1, m))
    n1 = m * float(poisson.cdf(g - 2, m)) if g >= 2 else 0.0          # E[n; n < g]
    n2 = n1 + (m * m * float(poisson.cdf(g - 3, m)) if g >= 3 else 0.0)  # E[n²; n < g]
    first = (g + lb) * p_all + n1
    second = ((g + lb) ** 2 + lb) * p_all + n2
    return max(second / first - 1.0, 0.0) if first > 0 else 0.0
