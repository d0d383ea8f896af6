"""The "Measured on your backend" panel end to end: a real ``agentprof loadtest --predict --out --html`` against the
prefix-caching loopback server, then ``agentprof report TRACE --loadtest FILE``; the terminal and the page (in
Chromium) show the file's figures, escaped, at 80 columns and 800 px; a file that is not a result is one error."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agentprof.demo.prefix_server import PrefixCachingServer
from agentprof.report.formats import fmt_duration, fmt_pct
from agentprof.report.measured import MARK, fmt_error, fmt_usd
from tests.cli_support import run
from tests.loadtest.conftest import FOUR, ROOT

from .report_support import LAYOUT_PROBE

TRACES = [str(FOUR[1]), str(FOUR[0])]
HOSTILE = "<img src=x onerror=alert(1)>[bold red]x[/]\x1b[2J"
ROWS_JS = """() => [...document.querySelectorAll('#measured table.lt-table tbody tr')].map(tr =>
    [...tr.cells].map(td => [td.textContent, td.scrollWidth <= td.clientWidth + 1 && td.getClientRects().length > 0]))"""


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> tuple[dict, Path, Path, str]:
    """Two recorded sessions, two calls each, run at once against the server with a prediction: the result file,
    the one-panel page and what --json printed. The command runs in its own process: Chromium's driver keeps an
    event loop running on this thread once a browser test has opened it."""
    d = tmp_path_factory.mktemp("measured")
    out, page = d / "lt.json", d / "lt.html"
    with PrefixCachingServer(base_s=0.05, prefill_s_per_token=2e-6, decode_s=5e-4) as srv:
        done = subprocess.run([sys.executable, "-m", "agentprof", "loadtest", *TRACES, "--endpoint",
                               srv.openai_base_url, "--model", "m", "--max-calls", "2", "--concurrency", "2",
                               "--cap-wait", "0.05", "--predict", "h200+x86", "--predict-model", "mistral-nemo-12b",
                               "--price", "3,15,0.3", "--json", "--out", str(out), "--html", str(page)],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), out, page, done.stdout


def expected_rows(d: dict) -> list[list[str]]:
    """The panel's rows as the file's numbers say they read: each figure formatted, the error recomputed."""
    p, rows = d["predicted"], []

    def err(m, q):
        return fmt_error((q - m) / m if m and q is not None else None)

    for key, name in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2e_s", "E2E")):
        for q in ("p50", "p90", "p99"):
            m, v = d[key][q], p[key][q]
            rows.append([f"{name} {q}", fmt_duration(m), fmt_duration(v), err(m, v)])
    for q in ("p50", "p90", "p99"):
        m, v = d["tasks"]["task_s"][q], p["tasks"]["task_s"][q]
        rows.append([f"task {q}", fmt_duration(m), fmt_duration(v), err(m, v)])
    n = d["sessions"]
    rows.append(["tasks done", f"{d['tasks']['completed']} of {n}", f"{p['tasks']['completed']} of {n}", ""])
    m, v = d["cache_read_share"], p["cache_read_share"]
    rows.append(["cache read", fmt_pct(m), fmt_pct(v), fmt_error(v - m, points=True)])
    rows.append(["trace reuse", fmt_pct(d["trace_reuse_share"]), "", ""])
    # the server's frontend per prompt token (its /tokenize timed), beside the catalog's for the system
    # (the test server's frontend takes no time per token: its timed slope is noise, None where not positive)
    m, v = d["prompts"]["server_frontend_s_per_token"], p["frontend_s_per_token"]
    rows.append(["frontend/token", "" if m is None else f"{m * 1e6:.2f} µs", f"{v * 1e6:.2f} µs",
                 fmt_error(None if m is None else (v - m) / m)])
    rows.append(["cost/task", fmt_usd(d["cost_per_task"]), "", ""])
    return rows


def test_result_file_is_what_json_prints_and_holds_a_measurement_and_a_prediction(result):
    d, _, _, printed = result
    assert json.loads(printed) == d and next(iter(d)) == MARK
    assert d["calls"] == {"sent": 4, "ok": 4, "failed": 0} and d["tasks"]["completed"] == 2
    assert set(d["sources"]) == {Path(t).name for t in TRACES}
    assert d["predicted"]["system"] == "h200+x86" and d["error"]["tasks.task_s.p99"] is not None
    assert 0 < d["cache_read_share"] < 1 and d["cost_per_task"] > 0


def test_report_terminal_shows_the_files_figures_in_80_columns(result, tmp_path, capsys):
    d, out, _, _ = result
    html = tmp_path / "r.html"
    code, stdout, err = run(capsys, "report", TRACES[0], "--loadtest", str(out), "-o", str(html), "--no-replay",
                            "--serving-concurrency", "none")
    assert code == 0, err
    assert "Measured on your backend" in stdout and "lt.json: 2 session(s), 2 at once · model m at" in stdout
    assert "calls 4 sent, 4 ok, 0 failed; 0 retries; tasks 2 of 2 completed" in stdout
    assert max(len(line) for line in stdout.splitlines()) <= 80
    lines = stdout.splitlines()
    for row in expected_rows(d):
        found = [re.split(r"\s{2,}", ln.strip()) for ln in lines if ln.startswith(row[0] + " ")]
        assert [c for c in row if c] in found, (row, found)
    # the page's data carries the same numbers, once
    data = json.loads(html.read_text().split('type="application/json">', 1)[1].split("</script>", 1)[0])
    rows = data["measured"]["runs"][0]["rows"]
    assert [r["cells"] for r in rows] == expected_rows(d)
    assert rows[0]["values"] == [d["ttft_s"]["p50"], d["predicted"]["ttft_s"]["p50"], d["error"]["ttft_s.p50"]]


@pytest.mark.browser
def test_panel_reads_in_chromium_escaped_and_unclipped(browser, result, tmp_path, capsys):
    d, _, page, _ = result
    hostile = dict(d, model=HOSTILE, endpoint="http://h/</script><b>x</b>")
    (tmp_path / "hostile.json").write_text(json.dumps(hostile))
    html = tmp_path / "r.html"
    code, stdout, err = run(capsys, "report", TRACES[0], "--loadtest", str(tmp_path / "hostile.json"), "-o",
                            str(html), "--no-replay", "--serving-concurrency", "none")
    assert code == 0, err
    assert "\x1b" not in stdout  # terminal: no escape codes, no markup read, the text kept (wrapped)
    assert "<imgsrc=xonerror=alert(1)>[boldred]x[/]\\x1b[2J" in re.sub(r"\s+", "", stdout)
    for path in (html, page):  # the report with the panel, and loadtest --html's page of it alone
        for width in (800, 1400):
            o = browser.open(path, width=width)
            o.page.set_viewport_size({"width": width, "height": 900})
            got = o.page.evaluate(LAYOUT_PROBE)
            assert o.errors == [] and o.dialogs == [] and o.requests == [path.resolve().as_uri()]
            assert got["scrollWidth"] <= width and got["clipped"] == [] and got["spilled"] == [], got
            assert got["blocks"][0][0] <= 60, got["blocks"][0]
            o.page.locator("#measured").scroll_into_view_if_needed()
            assert o.page.locator("#measured table.lt-table").is_visible()
            cells = o.page.evaluate(ROWS_JS)
            # the page joins a figure's number and unit with a no-break space
            assert [[t.replace("\xa0", " ") for t, _ in r] for r in cells] == expected_rows(d)
            assert got["split"] == [], got["split"]
            assert all(ok for r in cells for _, ok in r)  # every cell shown whole
            head = o.page.locator("#measured h3").inner_text()
            if path == html:
                assert "<img src=x onerror=alert(1)>[bold red]x[/]" in head and "</script><b>x</b>" in head
                assert o.page.locator("#measured img, #measured b").count() == 0
            o.page.close()


def _broken(d: dict, tmp: Path) -> list[tuple[str, str]]:
    """(file, the error it must give) for files that are not a load-test result."""
    cases = {
        "notjson.json": ("{calls: 4", "notjson.json:1: not JSON"),
        "list.json": ("[1, 2]", "not a load-test result: expected the JSON that `agentprof loadtest --out FILE`"),
        "foreign.json": (Path(TRACES[0]).read_text(), "not a load-test result (no 'agentprof_loadtest' key)"),
        "v2.json": (json.dumps({**d, MARK: 2}), "load-test result version 2: this agentprof reads version 1"),
        "type.json": (json.dumps({**d, "calls": {**d["calls"], "ok": "four"}}),
                      "'calls.ok' is \"four\": expected a whole number"),
        "gone.json": (json.dumps({**d, "ttft_s": {"p50": 1.0}}), "no 'ttft_s.p90': expected a number or null"),
        "pred.json": (json.dumps({**d, "predicted": {**d["predicted"], "system": None}}),
                      "'predicted.system' is null: expected a string"),
    }
    out = []
    for name, (text, msg) in cases.items():
        (tmp / name).write_text(text)
        out.append((str(tmp / name), msg))
    return out


def test_a_file_that_is_not_a_result_is_one_clear_error(result, tmp_path, capsys):
    d = result[0]
    for path, msg in _broken(d, tmp_path):
        html = tmp_path / "never.html"
        code, stdout, err = run(capsys, "report", TRACES[0], "--loadtest", path, "-o", str(html), "--no-replay")
        assert code == 2 and err.startswith(f"error: {path}") and msg in err, (path, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and not html.exists()
    code, _, err = run(capsys, "report", TRACES[0], "--loadtest", str(tmp_path / "absent.json"), "-o",
                       str(tmp_path / "never.html"))
    assert code == 2 and "absent.json: cannot read" in err
