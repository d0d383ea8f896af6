"""The device model's measured error, checked at demo time where it is weakest: the official InferenceX points
whose prompts are longer than any the fit was made on (held out: the fit never saw them), plus the stored
long-prompt (agentic) check: each accelerator's AgentX points predicted from the efficiency the other
accelerators' points fit.

The first is what ``agentprof devices check data/inferencex/official_api_points.csv --held-out-prompts`` prints;
the demo quotes it so the what-if figures never appear without their error bar.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentprof.errors import AgentprofError


@dataclass
class CalibrationError:
    """Held-out median / p90 absolute percentage errors of the cost model, and where they come from."""

    points: int
    covered: int
    median: dict[str, float | None]  # ttft, tpot, e2e
    p90: dict[str, float | None]
    off_5x: int  # covered points more than 5x off in TTFT, TPOT or E2E
    prompt_tokens: tuple[int, int]  # the held-out points' shortest and longest prompt
    agentic: dict[str, Any]  # stored check on long agentic prompts: in the fit and held out (fitted.toml [agentic])
    data_file: str

    def sentence(self) -> str:
        """One sentence for people: the long prompts' held-out errors (the official points and, where the fit
        stored it, the agentic ones)."""

        def pct(v: float | None) -> str:
            return f"{v * 100:.0f} %" if v is not None else "n/a"

        lo, hi = self.prompt_tokens
        tokens = f"{lo:,}-token" if lo == hi else f"{lo:,} to {hi:,}-token"
        s = (f"On {self.covered:,} official InferenceX points with {tokens} prompts, longer than any it was fitted on: "
             f"median error TTFT {pct(self.median['ttft'])}, TPOT {pct(self.median['tpot'])}, end-to-end "
             f"{pct(self.median['e2e'])}, p90 TTFT {pct(self.p90['ttft'])}, {self.off_5x} off by over 5×")
        a = self.agentic
        if a.get("held_out_points"):
            s += (f"; on {a['held_out_points']} long agentic prompts, each accelerator's from the others': "
                  f"TTFT {pct(a.get('held_out_median_ape_ttft'))}, inter-token {pct(a.get('held_out_median_ape_itl'))}")
        elif a.get("points"):
            s += (f"; on the {a['points']} long agentic prompts it was fitted on: TTFT "
                  f"{pct(a.get('median_ape_ttft'))}, inter-token {pct(a.get('median_ape_itl'))}")
        return s


def measured_error() -> CalibrationError | None:
    """Check the cost model in use on the official points with prompts longer than its fit's now; ``None`` when
    those points, or the points the fit was made on, are not in this installation."""
    from agentprof import resources
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.fidelity import HELD_OUT_POINTS, check, fit_points, longer_prompts
    from agentprof.replay.points import load_points

    path = resources.find(HELD_OUT_POINTS)
    if path is None or not path.is_file():
        return None
    fitted = load_fitted()
    try:
        seen = fit_points(fitted)
    except AgentprofError:
        return None
    held = longer_prompts(load_points(path), seen)
    if held.height == 0:
        return None
    s = check(held, fitted, load_catalog()).summary()
    agentic = dict(fitted.agentic or {})
    return CalibrationError(
        points=int(s["points"]), covered=int(s["covered"]),
        median={m: s[m]["median_ape"] for m in ("ttft", "tpot", "e2e")},
        p90={m: s[m]["p90_ape"] for m in ("ttft", "tpot", "e2e")},
        off_5x=int(s["off_5x"]), prompt_tokens=(int(held["isl"].min()), int(held["isl"].max())),
        agentic={k: agentic.get(k) for k in ("points", "median_ape_ttft", "median_ape_itl", "held_out_points",
                                             "held_out_median_ape_ttft", "held_out_median_ape_itl")},
        data_file=str(path))
