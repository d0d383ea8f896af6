"""CPU-bound orchestration: where the split comes from, and host scaling in a replay."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentprof.catalog.hardware import load_catalog
from agentprof.errors import AgentprofError
from agentprof.replay.orchestration import REASONS, cpu_split, load_cpu_map, scaled_exclusive
from agentprof.replay.replay import replay
from agentprof.replay.timeline import prepare

from .spans import agent, model, span, trace

CAT = load_catalog()


def _records():
    return [agent(0, 100),
            model("m1", 0, 10),
            span("t_cpu", "tool", 10, 30, name="execute_tool pytest", cpu_ns=15 * 10**9),   # 75 % CPU
            span("t_io", "tool", 30, 50, name="execute_tool web_fetch"),                    # unknown: I/O
            span("p", "parse", 50, 52),                                                     # parse: CPU
            span("t_decl", "tool", 52, 62, name="execute_tool build"),                      # declared
            span("t_attr", "tool", 62, 72, name="execute_tool lint",
                 attributes={"agentprof.cpu_bound": 0.5}),
            model("m2", 72, 100)]


def test_split_sources_in_order() -> None:
    t = trace(_records())
    lay = prepare(t.spans)
    s = cpu_split(t.spans, lay.host_parent, lay.excl_old, {"build": 1.0, "missing-tool": 1.0})
    by_id = dict(zip(t.spans.get_column("span_id").to_list(), range(t.spans.height), strict=True))
    frac = {k: s.fraction[i] for k, i in by_id.items()}
    why = {k: REASONS[s.reason[i]] for k, i in by_id.items()}
    assert frac["t_cpu"] == pytest.approx(0.75) and why["t_cpu"] == "cpu_ns"
    assert frac["t_io"] == 0 and why["t_io"] == "none"
    assert frac["p"] == 1 and why["p"] == "parse"
    assert frac["t_decl"] == 1 and why["t_decl"] == "declared"
    assert frac["t_attr"] == 0.5 and why["t_attr"] == "attribute"
    assert frac["m1"] == 0 and frac["root"] == 0  # model calls and the agent span are not orchestration
    summ = s.summary(lay.excl_old, np.isin(t.spans.get_column("kind").to_numpy(), ("tool", "parse")))
    assert summ["cpu_bound_s"] == pytest.approx(15 + 2 + 10 + 5)
    assert summ["not_cpu_bound_s"] == pytest.approx(20)
    assert summ["declared_but_absent"] == ["missing-tool"]


def test_cpu_ns_of_children_is_not_counted_twice() -> None:
    recs = [agent(0, 20), span("o", "orchestration", 0, 20, cpu_ns=12 * 10**9),
            span("p", "parse", 5, 15, parent="o", cpu_ns=10 * 10**9)]
    t = trace(recs)
    lay = prepare(t.spans)
    s = cpu_split(t.spans, lay.host_parent, lay.excl_old)
    assert s.fraction[1] == pytest.approx(2 / 10)  # 12 s CPU - 10 s in the child, over 10 s of own time


def test_scaling() -> None:
    t = trace(_records())
    lay = prepare(t.spans)
    s = cpu_split(t.spans, lay.host_parent, lay.excl_old)
    new = scaled_exclusive(lay.excl_old, s, 2.0)
    i = t.spans.get_column("span_id").to_list().index("t_cpu")
    assert new[i] == pytest.approx(20 * 0.25 + 20 * 0.75 / 2)


def test_vera_host_shortens_only_cpu_bound_orchestration() -> None:
    t = trace(_records())
    res = replay(t, ["b200+x86", "b200+vera"], cpu_bound={"build": 1.0}, cache_policy="none")
    x86, vera = res.systems
    assert x86.model_calls_s == pytest.approx(vera.model_calls_s)
    cpu = res.orchestration["cpu_bound_s"]
    assert cpu == pytest.approx(32.0)
    r_x86 = CAT.hosts["xeon-8570"].st_speed / CAT.hosts["xeon-8480c"].st_speed
    r_vera = CAT.hosts["vera"].st_speed / CAT.hosts["xeon-8480c"].st_speed
    assert x86.e2e_s - vera.e2e_s == pytest.approx(cpu / r_x86 - cpu / r_vera, rel=1e-6)
    assert vera.wait_s == x86.wait_s == res.recorded.wait_s


def test_nothing_is_guessed_without_evidence() -> None:
    recs = [agent(0, 50), model("m1", 0, 10), span("t", "tool", 10, 40), model("m2", 40, 50)]
    res = replay(trace(recs), ["b200+x86", "b200+vera"], cache_policy="none")
    assert res.orchestration["cpu_bound_s"] == 0 and res.orchestration["not_cpu_bound_s"] == pytest.approx(30)
    assert res.systems[0].e2e_s == pytest.approx(res.systems[1].e2e_s)
    assert any("no orchestration time was treated as CPU-bound" in n for n in res.notes)


def test_mapping_files(tmp_path: Path) -> None:
    f = tmp_path / "cpu.toml"
    f.write_text('pytest = true\nweb_fetch = false\nbuild = 0.8\n')
    assert load_cpu_map(f) == {"pytest": 1.0, "web_fetch": 0.0, "build": 0.8}
    j = tmp_path / "cpu.json"
    j.write_text(json.dumps({"cpu_bound": {"pytest": 0.9}}))
    assert load_cpu_map(j) == {"pytest": 0.9}
    f.write_text("pytest = 3\n")
    with pytest.raises(AgentprofError, match="pytest: expected a fraction"):
        load_cpu_map(f)
