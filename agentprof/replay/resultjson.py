"""InferenceX results as JSON, read into the points table's columns (:func:`agentprof.replay.points.load_points`).

Two shapes are read, an array of objects either way: a run's ``agg_bmk.json`` (flat: ``hw``, ``tp``, ``ep``,
``dp_attention``, the disaggregated pools' ``prefill_*`` / ``decode_*`` keys, and the metrics at the top level in
seconds) and the InferenceX API's points (the same configuration keys with ``hardware``, the metrics under
``metrics``). Either becomes one row per point with the CSV's names (``median_ttft_s``…); nothing is dropped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import polars as pl

from agentprof.errors import TraceFormatError

FRAMEWORK_ALIASES = {"mori-sglang": "sglang-disagg"}
"""Engine names a results file may use for a stack the catalog names otherwise (SGLang's disaggregated serving
over MoRI on MI355X is the calibration's ``sglang-disagg``)."""
METRICS = {"median_ttft_s": "median_ttft", "mean_ttft_s": "mean_ttft", "p99_ttft_s": "p99_ttft",
           "median_tpot_s": "median_tpot", "mean_tpot_s": "mean_tpot", "p99_tpot_s": "p99_tpot",
           "median_itl_s": "median_itl", "mean_itl_s": "mean_itl", "median_e2el_s": "median_e2el",
           "mean_e2el_s": "mean_e2el", "p99_e2el_s": "p99_e2el", "tput_per_gpu_tok_s": "tput_per_gpu",
           "output_tput_per_gpu_tok_s": "output_tput_per_gpu", "input_tput_per_gpu_tok_s": "input_tput_per_gpu"}
"""The points table's measured columns and the result keys they come from (seconds; tokens/s per GPU)."""
POOL_KEYS = ("prefill_tp", "prefill_ep", "prefill_dp_attention", "prefill_num_workers", "num_prefill_gpu",
             "decode_tp", "decode_ep", "decode_dp_attention", "decode_num_workers", "num_decode_gpu")


def _hardware(name: str) -> str:
    """The accelerator of a runner name (``b200-trt``, ``mi355x-amd_0`` → ``b200``, ``mi355x``)."""
    return re.split(r"[-_]", name.strip().lower(), maxsplit=1)[0]


def _row(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj.get("metrics") if isinstance(obj.get("metrics"), dict) else obj
    hw = str(obj.get("hardware") or obj.get("hw") or "")
    fw = str(obj.get("framework") or "")
    spec = obj.get("spec_method") or obj.get("spec_decoding") or ("mtp" if obj.get("mtp") else "none")
    disagg = bool(obj.get("disagg") or False)
    run = re.search(r"runs/(\d+)", str(obj.get("run_url") or ""))
    row: dict[str, Any] = {
        "run_id": int(run.group(1)) if run else obj.get("run_id") or obj.get("workflow_run_id"),
        "date": obj.get("date"), "hardware": _hardware(hw) if hw else None, "hw_raw": hw or None,
        "framework": FRAMEWORK_ALIASES.get(fw, fw) or None, "model": obj.get("model"),
        "model_prefix": obj.get("model_prefix") or obj.get("model"), "precision": obj.get("precision"),
        "spec_decoding": str(spec), "image": obj.get("image"),
        "isl": obj.get("isl"), "osl": obj.get("osl"), "conc": obj.get("conc"), "disagg": disagg,
        "is_multinode": bool(obj.get("is_multinode") or False)}
    if disagg:
        row.update({k: obj.get(k) for k in POOL_KEYS})
        gpus = [obj.get("num_prefill_gpu"), obj.get("num_decode_gpu")]
        row["num_gpus"] = obj.get("num_gpus") or (sum(gpus) if None not in gpus else None)
    else:  # one engine: the API repeats its TP, EP and DP attention in both pools' keys
        row["tp"] = obj.get("tp", obj.get("prefill_tp"))
        row["ep"] = obj.get("ep", obj.get("prefill_ep"))
        row["dp_attention"] = obj.get("dp_attention", obj.get("prefill_dp_attention"))
        row["num_gpus"] = obj.get("num_gpus") or obj.get("num_prefill_gpu") or row["tp"]
    row.update({col: m.get(key) for col, key in METRICS.items()})
    return row


TEXT = ("date", "hardware", "hw_raw", "framework", "model", "model_prefix", "precision", "spec_decoding", "image")
POOL_FLAGS = ("prefill_dp_attention", "decode_dp_attention")
FLAGS = ("disagg", "dp_attention", *POOL_FLAGS, "is_multinode")
"""Yes/no columns of the points table (CSV or JSON): read as booleans whatever the writer spelled them
(:func:`agentprof.replay.points.load_points`). ``prefill_dp_attention`` and ``decode_dp_attention`` are
InferenceX's own per-point flags of a disaggregated recipe's pools (its results' multi-node keys); a file without
them has each pool's data-parallel attention inferred (``points._layout``)."""


def _number(p: str, i: int, key: str, v: Any) -> float | None:
    """``v`` as a number, or a one-line error naming the file, the entry and the key."""
    if v is None or isinstance(v, (int, float)) and not isinstance(v, bool):
        return None if v is None else float(v)
    try:
        return float(str(v))
    except ValueError:
        raise TraceFormatError(p, None, f"entry {i + 1}: {key!r}: expected a number, got {v!r}") from None


def points_from_json(path: str | Path) -> pl.DataFrame:
    """The points of an InferenceX results JSON (an array of result objects), a row each, in the CSV's columns;
    a value of the wrong kind is an error naming its entry (1-based) and key."""
    p = str(path)
    try:
        data = json.loads(Path(p).read_text())
    except json.JSONDecodeError as e:
        raise TraceFormatError(p, e.lineno, f"not valid JSON ({e.msg})") from None
    if not isinstance(data, list) or not all(isinstance(o, dict) for o in data):
        raise TraceFormatError(p, None, "expected a JSON array of InferenceX result objects")
    rows = []
    for i, obj in enumerate(data):
        r = _row(obj)
        for k, v in r.items():
            if k in FLAGS:  # yes/no as text, read like a CSV's (load_points)
                r[k] = None if v is None else str(v).lower()
            elif k not in TEXT:
                r[k] = _number(p, i, k, v)
        for k in ("isl", "osl", "conc"):
            if not r[k] or r[k] <= 0:
                raise TraceFormatError(p, None, f"entry {i + 1}: {k!r}: expected a positive number, got {obj.get(k)!r}")
        rows.append(r)
    cols = list(dict.fromkeys(k for r in rows for k in r))
    schema = {k: pl.String if k in TEXT or k in FLAGS else pl.Int64 if k == "run_id" else pl.Float64 for k in cols}
    return pl.DataFrame([{k: r.get(k) for k in cols} for r in rows], schema=schema)
