"""``agentprof report`` and ``agentprof export`` end to end on the shared traces."""

from __future__ import annotations

import json

import polars as pl
import pytest

from agentprof.cli import main

from .report_support import BIG_SESSION, BIG_SESSION_SUBAGENTS, KV_FOLDER, SAMPLES


def _run(argv, capsys) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_report_writes_one_file_and_summarizes(tmp_path, capsys):
    out = tmp_path / "reports" / "cc.html"
    code, stdout, _ = _run(["report", str(BIG_SESSION), str(BIG_SESSION_SUBAGENTS), "-o", str(out),
                            "--system", "jalapeno", "--model", "gpt-oss-120b", "--no-serving-bands"], capsys)
    assert code == 0 and out.exists()
    assert "wrote" in stdout and "Where the time went" in stdout
    page = out.read_text()
    data = json.loads(page.split('type="application/json">', 1)[1].split("</script>", 1)[0])
    assert [r["name"] for r in data["whatif"]["rows"]] == ["recorded", "jalapeno"]
    assert data["cache"]["model"] == "gpt-oss-120b" and data["redundancy"]["status"] == "ok"
    assert data["title"].startswith(BIG_SESSION.name)


def test_report_rejects_an_unknown_system(tmp_path, capsys):
    code, _, err = _run(["report", str(BIG_SESSION), "-o", str(tmp_path / "x.html"), "-s", "warp-drive"], capsys)
    assert code == 2 and err.startswith("error: unknown system 'warp-drive'")
    assert not (tmp_path / "x.html").exists()


def test_export_formats(tmp_path, capsys, big_session):
    from agentprof.importers import load_any

    perfetto, mooncake, otlp = tmp_path / "t.json", tmp_path / "m.jsonl", tmp_path / "o.json"
    base = [str(BIG_SESSION), str(BIG_SESSION_SUBAGENTS)]
    assert _run(["export", *base, "--to", "perfetto", "-o", str(perfetto)], capsys)[0] == 0
    assert json.loads(perfetto.read_text())["traceEvents"]
    code, stdout, _ = _run(["export", *base, "--to", "mooncake", "-o", str(mooncake)], capsys)
    assert code == 0 and "requests" in stdout
    lines = mooncake.read_text().splitlines()
    assert len(lines) == big_session.spans.filter(pl.col("kind") == "model").height
    assert _run(["export", *base, "--to", "otlp-json", "-o", str(otlp)], capsys)[0] == 0
    back = load_any([otlp])  # OTLP JSON imports back to the same spans and token counts
    assert back.spans.height == big_session.spans.height
    assert back.spans.get_column("input_tokens").sum() == big_session.spans.get_column("input_tokens").sum()


def test_export_bad_block_is_a_one_line_error(tmp_path, capsys):
    code, _, err = _run(["export", str(KV_FOLDER / "trace_0121.json"), "--to", "mooncake", "--block", "100",
                         "-o", str(tmp_path / "m.jsonl")], capsys)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1


@pytest.mark.parametrize("fmt", ["perfetto", "mooncake"])
def test_export_unwritable_output_is_a_clear_error(tmp_path, capsys, fmt):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = _run(["export", str(KV_FOLDER / "trace_0121.json"), "--to", fmt, "-o", str(blocker / "out")], capsys)
    assert code == 2 and err.startswith("error: ") and "cannot write" in err


def test_serving_bands_are_asked_for(tmp_path, capsys):
    """The serving panel's bands are off by default (the one-session report stays fast); --serving-bands adds their
    simulations and nothing else; --no-serving-bands is the default spelled out."""
    def run(*extra: str) -> dict:
        out = tmp_path / f"cc{'-'.join(extra)}.html"
        code, _, _ = _run(["report", str(BIG_SESSION), "-o", str(out), "--system", "jalapeno", "--model",
                           "gpt-oss-120b", "--serving-concurrency", "1,2", "--no-analysis", *extra], capsys)
        assert code == 0
        return json.loads(out.read_text().split('type="application/json">', 1)[1].split("</script>", 1)[0])["serving"]

    plain, off, on = run(), run("--no-serving-bands"), run("--serving-bands")
    row = plain["systems"][0]
    assert row["system"] == "jalapeno" and "band" not in row and len(row["ttft_p99_s"]) == 2
    assert "--serving-bands" in plain["bands"] and "band" not in off["systems"][0]
    row2 = on["systems"][0]
    assert row2["band"]["concurrency"] == 2 and row2["ttft_p99_s"] == row["ttft_p99_s"] and "bands" not in on


def test_report_without_token_counts_notes_the_serving_panel_and_renders_the_rest(tmp_path, capsys):
    # aider's history logs no token counts: the named model is valid, the serving simulation cannot run
    out = tmp_path / "aider.html"
    code, stdout, err = _run(["report", str(SAMPLES / "aider" / ".aider.llm.history"), "-o", str(out),
                              "-s", "h200+x86", "--model", "gpt-oss-120b"], capsys)
    assert code == 0 and out.exists() and "Traceback" not in err
    assert "Serving: no model call has input and output token counts" in " ".join(stdout.split())
    data = json.loads(out.read_text().split('type="application/json">', 1)[1].split("</script>", 1)[0])
    assert data["serving"]["status"] == "missing" and "token counts" in data["serving"]["reason"]
    assert [r["name"] for r in data["whatif"]["rows"]] == ["recorded", "h200+x86"]
    assert data["cache"]["model"] == "gpt-oss-120b" and data["redundancy"]["status"] == "ok"
