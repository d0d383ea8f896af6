"""The device model's measured error, checked at demo time: fit on one InferenceX ISL/OSL setting, predict
the other (held-out), over every calibration point; plus the stored long-prompt (agentic) check: each
accelerator's AgentX points predicted from the efficiency the other accelerators' points fit.

This is what ``agentprof devices check data/inferencex/calibration_points.csv --cross-validate`` prints; the
demo quotes it so the what-if figures never appear without their error bar.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class CalibrationError:
    """Held-out median / p90 absolute percentage errors of the cost model, and where they come from."""

    points: int
    covered: int
    median: dict[str, float | None]  # ttft, tpot, e2e
    p90: dict[str, float | None]
    agentic: dict[str, Any]  # stored check on long agentic prompts: in the fit and held out (fitted.toml [agentic])
    data_file: str

    def sentence(self) -> str:
        """One sentence for people: held-out errors, and the long prompts' (held out where the fit stored it)."""

        def pct(v: float | None) -> str:
            return f"{v * 100:.0f} %" if v is not None else "n/a"

        where = f"{self.covered:,}" + (f" of {self.points:,}" if self.covered != self.points else "")
        s = (f"Its error on {where} InferenceX serving points, fit on one ISL/OSL setting and predicting the "
             f"other: median TTFT {pct(self.median['ttft'])}, TPOT {pct(self.median['tpot'])}, end-to-end "
             f"{pct(self.median['e2e'])} (p90 {pct(self.p90['ttft'])}, {pct(self.p90['tpot'])}, "
             f"{pct(self.p90['e2e'])})")
        a = self.agentic
        if a.get("held_out_points"):
            s += (f"; on {a['held_out_points']} long agentic prompts, each accelerator's predicted from the others': "
                  f"TTFT {pct(a.get('held_out_median_ape_ttft'))}, inter-token {pct(a.get('held_out_median_ape_itl'))}")
        elif a.get("points"):
            s += (f"; on the {a['points']} long agentic prompts it was fitted on: TTFT "
                  f"{pct(a.get('median_ape_ttft'))}, inter-token {pct(a.get('median_ape_itl'))}")
        return s


def points_file() -> Path | None:
    """The InferenceX calibration points of the repository agentprof runs from (or of the working folder)."""
    from agentprof import resources
    from agentprof.replay.calibration import DEFAULT_POINTS

    p = resources.find(DEFAULT_POINTS)
    return p if p is not None and p.is_file() else None


def measured_error() -> CalibrationError | None:
    """Cross-validate the cost model on the calibration points now; ``None`` when the points are not here."""
    from agentprof.catalog.hardware import load_catalog
    from agentprof.replay.calibration import load_fitted
    from agentprof.replay.fidelity import cross_validate
    from agentprof.replay.points import load_points

    path = points_file()
    if path is None:
        return None
    pooled = cross_validate(load_points(path), load_catalog())["pooled"]
    agentic = dict(load_fitted().agentic or {})
    return CalibrationError(
        points=int(pooled["points"]), covered=int(pooled["covered"]),
        median={m: pooled[m]["median_ape"] for m in ("ttft", "tpot", "e2e")},
        p90={m: pooled[m]["p90_ape"] for m in ("ttft", "tpot", "e2e")},
        agentic={k: agentic.get(k) for k in ("points", "median_ape_ttft", "median_ape_itl", "held_out_points",
                                             "held_out_median_ape_ttft", "held_out_median_ape_itl")},
        data_file=str(path))
