#!/usr/bin/env python3
"""Import throughput of ``agentprof import`` against plain ``json`` parsing of the same files, same run.

The kv-cache-tester corpus is synthetic: the 19 shipped samples (traces/samples/kv-cache-tester) replicated to
``--traces`` files (default 700, about the size of the tool's own traces/ folder). Copy *j* of a sample gets
``id = trace_NNNN`` and every hash id shifted by ``j * 100_003`` (ids stay inside 32 bits), so copies share no
blocks with each other while keeping each conversation's prefix structure, request count, tokens and timing.
The other formats import their shipped samples, replicated ``--copies`` times, each copy made distinct (session
ids or one prompt line changed): identical copies would be imported once.

Baseline: ``json.loads`` of every file (JSONL: of every line), timed in the same process just before.
Prints one row per format: MB of source JSON, baseline and import MB/s, the ratio, and peak memory.

    .venv/bin/python scripts/bench_import.py             # the 700-trace corpus (~0.45 GB in /tmp) + the rest
    .venv/bin/python scripts/bench_import.py --quick     # 70 traces, 3 copies: a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "traces" / "samples"
sys.path.insert(0, str(ROOT))


def build_kvct(dst: Path, n: int) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    srcs = sorted((SAMPLES / "kv-cache-tester").glob("*.json"))
    docs = [json.loads(p.read_text()) for p in srcs]
    for k in range(n):
        doc = docs[k % len(docs)]
        shift = (k // len(docs)) * 100_003
        out = dict(doc, id=f"trace_{k + 1:04d}")
        out["requests"] = [dict(r, hash_ids=[h + shift for h in r["hash_ids"]]) for r in doc["requests"]]
        (dst / f"trace_{k + 1:04d}.json").write_text(json.dumps(out, separators=(",", ":")))


def _replace_all(text: str, pairs: dict[str, str]) -> str:
    for a, b in pairs.items():
        text = text.replace(a, b)
    return text


_UUID = re.compile(r"\b([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{8})[0-9a-f]{4}\b")


def build_others(dst: Path, copies: int) -> dict[str, Path]:
    """Per format, a folder with ``copies`` distinct copies of the shipped samples."""
    out: dict[str, Path] = {}
    for fmt, src in (("claude-code", SAMPLES / "claude-code"), ("codex", SAMPLES / "codex"),
                     ("openhands", SAMPLES / "openhands" / "django__django-10554"),
                     ("mini-swe-agent", SAMPLES / "mini-swe-agent"), ("aider", SAMPLES / "aider")):
        folder = dst / fmt
        folder.mkdir(parents=True, exist_ok=True)
        for c in range(copies):
            tag = f"{c:04d}"
            if fmt == "claude-code":
                # every uuid (session and record ids) gets the copy's tag: records with the same uuid in two
                # files are one record (a resumed session's copies), imported once
                target = folder / tag
                for f in src.rglob("*.jsonl"):
                    rel = Path(_UUID.sub(lambda m, t=tag: m.group(1) + t, str(f.relative_to(src))))
                    (target / rel).parent.mkdir(parents=True, exist_ok=True)
                    (target / rel).write_text(_UUID.sub(lambda m, t=tag: m.group(1) + t, f.read_text()))
            elif fmt == "codex":
                f = next(src.glob("*.jsonl"))
                sid = "019e1625-789d-76c0-80ab-3724b5ddb799"
                new = sid[:-4] + tag
                (folder / f.name.replace(sid, new)).write_text(f.read_text().replace(sid, new))
            elif fmt == "openhands":
                shutil.copytree(src, folder / f"django__django-10554-{tag}")
            elif fmt == "mini-swe-agent":
                f = next(src.glob("*.json"))
                (folder / f"{tag}-{f.name}").write_text(f.read_text().replace("django__django-13807",
                                                                              f"django__django-13807-{tag}"))
            else:
                (folder / tag).mkdir(exist_ok=True)
                text = (src / ".aider.llm.history").read_text()
                (folder / tag / ".aider.llm.history").write_text(
                    text.replace("USER I am working with you", f"USER [{tag}] I am working with you", 1))
        out[fmt] = folder
    return out


def baseline(files: list[Path]) -> tuple[float, int]:
    """Seconds to ``json.loads`` every file (JSONL: every line; Aider's text: a split into lines)."""
    size = 0
    t = time.perf_counter()
    for f in files:
        raw = f.read_bytes()
        size += len(raw)
        if f.suffix == ".jsonl":
            for line in raw.split(b"\n"):
                if line.strip():
                    json.loads(line)
        elif f.suffix == ".history":
            raw.decode("utf-8", "replace").split("\n")
        else:
            json.loads(raw)
    return time.perf_counter() - t, size


def bench(label: str, folder: Path, fmt: str) -> dict:
    from agentprof.importers import load_any

    files = sorted(p for p in folder.rglob("*") if p.is_file())
    base_s, size = baseline(files)
    t = time.perf_counter()
    trace = load_any(folder, fmt=fmt)
    imp_s = time.perf_counter() - t
    mb = size / 1e6
    row = {"format": label, "files": len(files), "MB": round(mb, 1), "spans": trace.spans.height,
           "json_s": round(base_s, 2), "import_s": round(imp_s, 2), "json_MBps": round(mb / base_s, 1),
           "import_MBps": round(mb / imp_s, 1), "import/json_time": round(imp_s / base_s, 2)}
    if fmt == "kv-cache-tester":
        from agentprof.trace import read, write

        p = folder.parent / "kvct.parquet"
        t = time.perf_counter()
        write(trace, p)
        w = time.perf_counter() - t
        t = time.perf_counter()
        read(p)
        row.update({"parquet_write_s": round(w, 2), "parquet_read_s": round(time.perf_counter() - t, 2),
                    "parquet_MB": round(p.stat().st_size / 1e6, 1)})
    row["peak_rss_MB"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 0)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--traces", type=int, default=700, help="kv-cache-tester files in the synthetic corpus")
    ap.add_argument("--copies", type=int, default=10, help="copies of each other format's samples")
    ap.add_argument("--quick", action="store_true", help="70 traces and 3 copies")
    ap.add_argument("--dir", default="/tmp/agentprof-bench-import", help="where the corpus is built")
    ap.add_argument("--only", choices=["kv-cache-tester", "others"], help="run one part")
    ap.add_argument("--keep", action="store_true", help="keep the corpus afterwards")
    args = ap.parse_args()
    if args.quick:
        args.traces, args.copies = 70, 3
    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    print(f"cores: {os.cpu_count()}  python: {sys.version.split()[0]}")
    rows = []
    if args.only in (None, "kv-cache-tester"):
        build_kvct(root / "kvct", args.traces)
        rows.append(bench(f"kv-cache-tester ({args.traces} traces)", root / "kvct", "kv-cache-tester"))
        shutil.rmtree(root / "kvct", ignore_errors=True)
    if args.only in (None, "others"):
        for fmt, folder in build_others(root / "others", args.copies).items():
            rows.append(bench(f"{fmt} (x{args.copies})", folder, fmt))
    for r in rows:
        print(json.dumps(r))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
