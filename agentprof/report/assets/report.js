/* agentprof report: renders the embedded data (never fetched) as cards, a canvas Gantt and SVG charts.
   Every text from the trace is inserted with text nodes (textContent, createTextNode, canvas fillText),
   never parsed as HTML. */
(function () {
  "use strict";

  var DATA = JSON.parse(document.getElementById("agentprof-data").textContent);
  var D = DATA;  // the payload being drawn: the page's, or one trace's on a comparison page (see renderCompare)
  var SVGNS = "http://www.w3.org/2000/svg";
  var KINDS = ["model", "tool", "parse", "orchestration", "wait"];
  var CSSV = getComputedStyle(document.documentElement);
  var COLOR = {};
  KINDS.concat(["agent", "miss", "cached", "reuse"]).forEach(function (k) {
    COLOR[k] = (CSSV.getPropertyValue("--" + k) || "").trim() || "#888";
  });
  var KIND_LABEL = { model: "model", tool: "tool", parse: "parse", orchestration: "orchestration", wait: "wait" };
  var SERIES = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#7f7f7f", "#f0e442"];

  /* ---------- DOM helpers: text children become text nodes ---------- */
  /* a line never breaks inside a figure (figures.js); SVG text is one line and keeps its spaces */
  function append(el, kids) {
    if (kids === undefined || kids === null || kids === false) return el;
    if (!Array.isArray(kids)) kids = [kids];
    kids.forEach(function (k) {
      if (k === undefined || k === null || k === false) return;
      el.appendChild(k instanceof Node ? k : document.createTextNode(el.namespaceURI === SVGNS ? String(k) : agentprofWhole(String(k))));
    });
    return el;
  }
  function h(tag, attrs, kids) {
    var el = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) return;
      if (k === "style") Object.assign(el.style, v);
      else if (k.slice(0, 2) === "on") el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    });
    return append(el, kids);
  }
  function s(tag, attrs, kids) {
    var el = document.createElementNS(SVGNS, tag);
    if (attrs) Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null) return;
      el.setAttribute(k, String(v));
    });
    return append(el, kids);
  }
  function titled(el, text) { el.appendChild(s("title", null, text)); return el; }

  /* ---------- number formatting ---------- */
  function isNum(x) { return typeof x === "number" && isFinite(x); }
  function fmtInt(x) { return isNum(x) ? Math.round(x).toLocaleString("en-US") : "—"; }
  function fmtTok(x) {
    if (!isNum(x)) return "—";
    var a = Math.abs(x);
    if (a >= 1e9) return (x / 1e9).toFixed(a >= 1e10 ? 1 : 2) + "B";
    if (a >= 1e6) return (x / 1e6).toFixed(a >= 1e7 ? 1 : 2) + "M";
    if (a >= 1e4) return (x / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "K";
    return fmtInt(x);
  }
  function fmtPct(x, d) { return isNum(x) ? (x * 100).toFixed(d === undefined ? 1 : d) + " %" : "—"; }
  function fmtDur(sec) {
    if (!isNum(sec)) return "—";
    var a = Math.abs(sec);
    if (a === 0) return "0 s";
    if (a < 1e-3) return (sec * 1e6).toFixed(0) + " µs";
    if (a < 1) return (sec * 1e3).toFixed(a < 0.01 ? 2 : a < 0.1 ? 1 : 0) + " ms";
    if (a < 60) return sec.toFixed(a < 10 ? 2 : 1) + " s";
    var m = Math.floor(a / 60), rs = Math.round(a - m * 60);
    if (rs === 60) { m += 1; rs = 0; }
    if (m < 60) return (sec < 0 ? "-" : "") + m + " m " + String(rs).padStart(2, "0") + " s";
    var hh = Math.floor(m / 60), mm = m - hh * 60;
    if (hh < 48) return (sec < 0 ? "-" : "") + hh + " h " + String(mm).padStart(2, "0") + " m";
    return (sec / 86400).toFixed(1) + " d";
  }
  function fmtBytes(b) {
    if (!isNum(b)) return "—";
    var u = ["B", "KB", "MB", "GB", "TB", "PB"], i = 0;
    while (Math.abs(b) >= 1000 && i < u.length - 1) { b /= 1000; i++; }
    return (b >= 100 || i === 0 ? b.toFixed(0) : b >= 10 ? b.toFixed(1) : b.toFixed(2)) + " " + u[i];
  }
  function fmtX(x) { return isNum(x) ? (x >= 10 ? x.toFixed(1) : x.toFixed(2)) + "×" : "—"; }

  /* ---------- scales and ticks ---------- */
  function niceStep(span, n) {
    var raw = span / Math.max(1, n), p = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
  }
  function ticks(lo, hi, n) {
    if (!(hi > lo)) return [lo];
    var st = niceStep(hi - lo, n), out = [];
    for (var v = Math.ceil(lo / st) * st; v <= hi + st * 1e-9; v += st) out.push(+v.toPrecision(12));
    return out;
  }
  var TIME_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5,
    1e6, 2e6, 5e6, 1e7, 15e6, 3e7, 6e7, 12e7, 3e8, 6e8, 9e8, 18e8, 36e8, 72e8, 108e8, 216e8, 432e8, 864e8];
  function timeStep(spanUs, n) {
    var raw = spanUs / Math.max(1, n);
    for (var i = 0; i < TIME_STEPS.length; i++) if (TIME_STEPS[i] >= raw) return TIME_STEPS[i];
    return TIME_STEPS[TIME_STEPS.length - 1] * Math.ceil(raw / TIME_STEPS[TIME_STEPS.length - 1]);
  }
  function fmtTick(us, step) {
    var sec = us / 1e6;
    if (step < 1e3) return (us / 1e3).toFixed(step < 10 ? 3 : step < 100 ? 2 : 1) + " ms";
    if (step < 1e6) return (sec < 1 ? (us / 1e3).toFixed(0) + " ms" : sec.toFixed(step < 1e5 ? 2 : 1) + " s");
    if (sec < 60) return Math.round(sec) + " s";
    var m = Math.floor(sec / 60), rs = Math.round(sec - m * 60);
    if (sec < 3600) return m + "m" + (rs ? " " + String(rs).padStart(2, "0") + "s" : "");
    var hh = Math.floor(m / 60), mm = m - hh * 60;
    return hh + "h" + (mm ? " " + String(mm).padStart(2, "0") + "m" : "");
  }

  // round duration ticks for an axis in seconds (5 m, 10 m, 1 h …), labelled without zero parts
  function durTicks(lo, hi, n) {
    var st = timeStep((hi - lo) * 1e6, n) / 1e6, out = [];
    for (var v = Math.ceil(lo / st - 1e-9) * st; v <= hi + st * 1e-9; v += st) out.push(v);
    return out;
  }
  function fmtRound(sec) {
    if (!isNum(sec)) return "—";
    if (sec === 0) return "0";
    if (Math.abs(sec) < 1) return fmtDur(sec);
    if (Math.abs(sec) < 60 || Math.abs(sec / 60 - Math.round(sec / 60)) > 1e-6) return +sec.toPrecision(6) + " s";
    var m = Math.round(sec / 60), hh = Math.floor(m / 60), mm = m - hh * 60;
    if (!hh) return m + " m";
    return hh + " h" + (mm ? " " + mm + " m" : "");
  }
  /* a disclosure: a one-line summary that opens on the details (kept out of the first read) */
  function details(cls, summary, kids) {
    return h("details", { class: "more" + (cls ? " " + cls : "") }, [h("summary", null, summary)].concat(kids || []));
  }
  /* a long explanation as a list of its sentences, so no paragraph runs on */
  function sentences(text) {
    var parts = String(text).split(/(?<=[.;])\s+(?=[A-Z(])/);
    return h("ul", { class: "sentences" }, parts.filter(function (t) { return t.trim(); }).map(function (t) { return h("li", null, t); }));
  }
  function uniq(list) {
    var seen = {};
    return list.filter(function (t) { t = String(t); if (seen[t]) return false; seen[t] = 1; return true; });
  }

  /* ---------- page scaffolding ---------- */
  var app = document.getElementById("app");
  var toc = document.getElementById("toc");
  var PRE = "";  // element id prefix of the trace being drawn (comparison pages draw several)
  function panel(id, title, lede) {
    var sec = h("section", { class: "panel", id: PRE + id }, [h("h2", null, title)]);
    if (lede) sec.appendChild(h("p", { class: "lede" }, lede));
    app.appendChild(sec);
    if (toc) toc.appendChild(h("a", { href: "#" + PRE + id }, title));
    return sec;
  }
  function missing(sec, reason) { sec.appendChild(h("div", { class: "missing" }, reason)); }
  function guard(name, fn) {
    try { fn(); } catch (e) {
      console.error("agentprof report: the " + name + " panel failed:", e);
      app.appendChild(h("div", { class: "missing" }, "the " + name + " panel could not be drawn: " + e.message));
    }
  }

  /* ---------- tooltip ---------- */
  var tip = h("div", { class: "tip", role: "tooltip" });
  document.body.appendChild(tip);
  function showTip(x, y, lines) {
    tip.textContent = "";
    lines.forEach(function (ln) {
      if (ln === null || ln === undefined) return;
      var row = h("div");
      if (typeof ln === "string") row.textContent = ln;
      else if (ln.pre) row.appendChild(h("pre", null, ln.pre));
      else append(row, [ln.b ? h("b", null, ln.b) : null, ln.t ? " " + ln.t : null, ln.dim ? h("span", { class: "dim" }, " " + ln.dim) : null]);
      tip.appendChild(row);
    });
    tip.style.display = "block";
    var w = tip.offsetWidth, ht = tip.offsetHeight;
    var left = x + 14, top = y + 14;
    if (left + w > window.innerWidth - 8) left = Math.max(8, x - w - 14);
    if (top + ht > window.innerHeight - 8) top = Math.max(8, y - ht - 14);
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  }
  function hideTip() { tip.style.display = "none"; }

  /* ---------- header and headline ---------- */
  function renderHeader() {
    var m = D.meta || {}, hl = D.headline || {};
    var bits = [];
    if (m.source_format) bits.push(m.source_format);
    if (isNum(hl.top_sessions)) bits.push(fmtInt(hl.top_sessions) + (hl.top_sessions === 1 ? " session" : " sessions") +
      (hl.subagent_sessions ? " + " + fmtInt(hl.subagent_sessions) + " nested (subagent, compaction)" : ""));
    if (isNum(hl.model_calls)) bits.push(fmtInt(hl.model_calls) + " model calls");
    if (D.generated) bits.push("generated " + D.generated);
    document.getElementById("subtitle").textContent = bits.join(" · ");
  }

  function card(label, value, sub, color, na) {
    return h("div", { class: "card" + (na ? " na" : "") }, [
      h("div", { class: "k" }, [color ? h("span", { class: "swatch", style: { background: color } }) : null, label]),
      h("div", { class: "v", title: value }, value),
      sub ? h("div", { class: "s" }, sub) : null,
    ]);
  }

  function renderHeadline() {
    var hl = D.headline || {};
    var sec = panel("headline", "Where the time went", null);
    renderAnswer(sec, D.answer);
    var cards = h("div", { class: "cards" });
    sec.appendChild(cards);
    var t = hl.time || {}, sh = hl.shares || {};
    cards.appendChild(card("Wall time", fmtDur(hl.wall_s), hl.top_sessions > 1 ? "summed over " + fmtInt(hl.top_sessions) + " sessions" : "end to end", null, !isNum(hl.wall_s)));
    var sa = hl.shares_active || {};
    if (isNum(hl.agent_active_s)) {
      var human = [], wr = hl.waits_by_reason || {};
      ["user_turn", "approval", "idle", "unrecorded"].forEach(function (r) { if (isNum(wr[r]) && wr[r] > 0) human.push(r.replace("_", " ") + " " + fmtDur(wr[r])); });
      cards.appendChild(card("Agent-active time", fmtDur(hl.agent_active_s),
        human.length ? "wall minus " + human.join(", ") : "the wall: no user turns, approvals or idle gaps"));
    }
    KINDS.forEach(function (k) {
      var sec_ = t[k + "_s"];
      var sub = isNum(sec_) ? fmtDur(sec_) : (hl.time ? "not recorded" : "needs the analysis");
      if (isNum(sa[k + "_s"])) sub += " · " + fmtPct(sa[k + "_s"]) + " of agent-active";
      if (k === "orchestration" && isNum(t.startup_s) && t.startup_s > 1e-3) sub += "; " + fmtDur(t.startup_s) + " start-up before the first span";
      cards.appendChild(card(KIND_LABEL[k] + " share", isNum(sh[k + "_s"]) ? fmtPct(sh[k + "_s"]) : "—",
        sub, COLOR[k], !isNum(sh[k + "_s"])));
    });
    cards.appendChild(card("Model calls", fmtInt(hl.model_calls), isNum(hl.tool_calls) ? fmtInt(hl.tool_calls) + " tool calls" : null));
    cards.appendChild(card("Input tokens", fmtTok(hl.input_tokens),
      (isNum(hl.output_tokens) ? fmtTok(hl.output_tokens) + " output · " : "") + (isNum(hl.calls_with_usage) ? fmtInt(hl.calls_with_usage) + " calls report usage" : ""), null, !isNum(hl.input_tokens)));
    cards.appendChild(card("Provider cache read share", fmtPct(hl.cache_read_share),
      isNum(hl.cache_read_tokens) ? "token-weighted: " + fmtTok(hl.cache_read_tokens) + " tokens (as the provider reported them) read from its cache" : "provider reported no cache reads", COLOR.cached, !isNum(hl.cache_read_share)));
    cards.appendChild(card("Amdahl bound", fmtDur(hl.amdahl_bound_s),
      isNum(hl.max_speedup) ? "task time with instant model calls: at most " + fmtX(hl.max_speedup) + " faster" +
        (isNum(hl.max_speedup_active) ? " (" + fmtX(hl.max_speedup_active) + " of agent-active time, " + fmtDur(hl.amdahl_bound_active_s) + ")" : "")
        : "needs the analysis", null, !isNum(hl.amdahl_bound_s)));

  }

  /* the time split as one stacked bar with its legend (the headline's seconds, shares of wall) */
  function splitBar(hl) {
    var t = hl.time || {};
    var wall = hl.time && isNum(hl.time.wall_s) ? hl.time.wall_s : null;
    if (wall && wall > 0) {
      var bar = h("div", { class: "splitbar", role: "img", "aria-label": "time split" });
      var leg = h("div", { class: "legend" });
      var covered = 0;
      KINDS.forEach(function (k) {
        var v = t[k + "_s"];
        if (!isNum(v) || v <= 0) return;
        covered += v;
        var seg = h("div", { style: { width: (100 * v / wall) + "%", background: COLOR[k] } });
        seg.title = KIND_LABEL[k] + ": " + fmtDur(v) + " (" + fmtPct(v / wall) + ")";
        bar.appendChild(seg);
        leg.appendChild(h("span", { class: "item" }, [h("span", { class: "swatch", style: { background: COLOR[k] } }), KIND_LABEL[k] + " " + fmtPct(v / wall)]));
      });
      if (covered < wall * 0.999) leg.appendChild(h("span", { class: "item muted" }, "parallel work counted once"));
      return h("div", { class: "split" }, [bar, leg]);
    }
    return null;
  }

  /* the first screen's answer (payload "answer", written once in agentprof.report.answer): the split, each
     replayed system's task time and speed-up with its range and why not more, and the biggest lever */
  function renderAnswer(sec, A) {
    var hl = D.headline || {};
    var box = h("div", { class: "answer" });
    if (A && A.split) box.appendChild(h("p", { class: "ans-split" }, A.split));
    var sb = splitBar(hl);
    if (sb) box.appendChild(sb);
    var sys = (A && A.systems) || [];
    if (sys.length) {
      var body = sys.map(function (r) {
        if (r.error) return h("tr", null, [h("td", { class: "name" }, r.name), h("td", { class: "muted", colspan: "3" }, "not replayed: " + r.error)]);
        var sp = fmtX(r.speedup) + (r.band ? " (" + fmtX(r.band[0]) + "–" + fmtX(r.band[1]) + ")" : "");
        var name = h("td", { class: "name" }, r.name);
        if (r.display) name.title = r.display;
        return h("tr", { "data-system": r.name }, [name, h("td", { class: "r" }, fmtDur(r.e2e_s)),
          h("td", { class: "r sp" + (isNum(r.speedup) && r.speedup >= 1 ? " up" : " down") }, sp), h("td", null, r.why_not || "")]);
      });
      box.appendChild(h("table", { class: "t ans-sys" }, [h("thead", null, h("tr", null, [h("th", null, "replayed on"),
        h("th", { class: "r" }, "task time"), h("th", { class: "r" }, "speed-up (range)"), h("th", null, "why not more")])), h("tbody", null, body)]));
    }
    var lever = [];
    if (A && A.lever) lever.push(h("b", null, "Biggest lever: "), A.lever.text + ".");
    if (A && A.ceiling) lever.push(" " + A.ceiling.text.charAt(0).toUpperCase() + A.ceiling.text.slice(1) + ".");
    if (lever.length) box.appendChild(h("p", { class: "ans-lever" }, lever));
    var ranged = sys.filter(function (r) { return r.band && r.band_causes; });
    if (ranged.length) {
      var rows = ((D.whatif || {}).rows) || [], params = {};
      rows.forEach(function (r) { params[r.name] = r.band_ranged || []; });
      box.appendChild(details("ans-ranges", "Why the speed-ups are ranges", [h("ul", null, ranged.map(function (r) {
        return h("li", null, r.name + " " + fmtX(r.band[0]) + "–" + fmtX(r.band[1]) + ": " + r.band_causes +
          "; the range puts each at its fast and at its slow end.");
      })), details("params", "Catalog numbers behind the ranges", [h("ul", { class: "mono small" }, ranged.map(function (r) {
        return h("li", null, r.name + ": " + (params[r.name] || []).join(", "));
      }))])]));
    }
    if (box.childNodes.length) sec.appendChild(box);
  }

  function renderMissing() {
    var items = D.missing || [];
    if (!items.length) return;
    var box = h("div", { class: "callout", id: PRE + "missing" }, [h("h3", null, "What this trace does not tell"), h("ul", null, items.map(function (m) { return h("li", null, m); }))]);
    app.appendChild(box);
  }

  /* ---------- timeline (canvas Gantt) ---------- */
  function renderTimeline() {
    var T = D.timeline;
    var sec = panel("timeline", "Timeline", "Every span per session, subagents nested under the session that started them. " +
      "Drag to pan, Ctrl + wheel (or the buttons, or double-click) to zoom, hover for details.");
    if (!T || !T.spans || !T.spans.start_delta.length) {
      missing(sec, T && T.n_spans_total ? "none of the " + fmtInt(T.n_spans_total) + " spans has usable start and end times, so there is nothing to draw" : "the trace has no spans to draw");
      return;
    }
    new Timeline(sec, T);
  }

  function Timeline(sec, T) {
    var self = this;
    var S = T.spans, n = S.start_delta.length;
    S.start = new Float64Array(n);
    for (var d0 = 0, acc0 = 0; d0 < n; d0++) { acc0 += S.start_delta[d0]; S.start[d0] = acc0; }
    var ROW_H = 18, AXIS_H = 24, PAD = 3;
    var hidden = {};
    var callOf = new Map(), errOf = new Map(), derived = new Set(T.derived || []), textOf = new Map();
    T.calls.span.forEach(function (p, i) { callOf.set(p, i); });
    T.errors.span.forEach(function (p, i) { errOf.set(p, T.errors.type[i]); });
    var TX = T.text;
    if (TX && TX.span) TX.span.forEach(function (p, i) { textOf.set(p, i); });
    var agg = new Map();
    if (T.aggregated && T.aggregated.span) T.aggregated.span.forEach(function (p, i) { agg.set(p, T.aggregated.count[i]); });
    var rows = [];
    for (var r = 0; r < T.rows; r++) rows.push([]);
    for (var i = 0; i < n; i++) rows[S.row[i]].push(i);
    // running maximum of span ends per row: rows may overlap when many spans run at once
    var rowMaxEnd = rows.map(function (list) {
      var out = new Float64Array(list.length), m = -Infinity;
      for (var q = 0; q < list.length; q++) { var j = list[q]; m = Math.max(m, S.start[j] + S.dur[j]); out[q] = m; }
      return out;
    });
    var rowSession = new Int32Array(T.rows);
    T.sessions.forEach(function (ss, si) { for (var r = ss.row0; r < ss.row0 + ss.rows; r++) rowSession[r] = si; });
    var extent = Math.max(1, T.extent_us);
    var v0 = 0, v1 = extent * 1.01, scrollY = 0;

    var toolbar = h("div", { class: "toolbar" });
    var legend = h("div", { class: "legend", style: { marginTop: 0 } });
    KINDS.forEach(function (k) {
      var b = h("button", { class: "item", type: "button", "aria-pressed": "true", title: "show or hide " + k + " spans" },
        [h("span", { class: "swatch", style: { background: COLOR[k] } }), k]);
      b.addEventListener("click", function () { hidden[k] = !hidden[k]; b.setAttribute("aria-pressed", hidden[k] ? "false" : "true"); draw(); });
      legend.appendChild(b);
    });
    legend.appendChild(h("span", { class: "item hint" }, [h("span", { class: "swatch", style: { background: COLOR.agent, border: "1px solid #cfd6de" } }), "session extent"]));
    if (derived.size) legend.appendChild(h("span", { class: "item hint" }, "faded: times inferred from neighbouring records"));
    legend.appendChild(h("span", { class: "item hint" }, [h("span", { class: "swatch", style: { background: COLOR.miss } }), "error"]));
    var zoomIn = h("button", { class: "btn", type: "button", title: "zoom in" }, "+");
    var zoomOut = h("button", { class: "btn", type: "button", title: "zoom out" }, "−");
    var fit = h("button", { class: "btn", type: "button", title: "show the whole trace" }, "Fit");
    toolbar.appendChild(h("span", { class: "group" }, [zoomIn, zoomOut, fit]));
    toolbar.appendChild(legend);
    sec.appendChild(toolbar);
    var box = h("div", { class: "tl" });
    var canvas = h("canvas", { tabindex: "0", "aria-label": "timeline of spans; use the arrow keys to pan and + or - to zoom" });
    box.appendChild(canvas);
    sec.appendChild(box);
    var notes = [];
    if (T.n_untimed) notes.push(fmtInt(T.n_untimed) + " spans have no usable times and are not drawn.");
    var nAgg = agg.size;
    if (nAgg) notes.push("Zoomed-out detail: " + fmtInt(T.n_spans_total) + " spans are drawn as " + fmtInt(n) + " (runs of short spans of one kind merged); export to Perfetto for every span.");
    notes.push(T.t0_iso ? "Time axis: from the first recorded instant (" + T.t0_iso + ")." : "Time axis: from the start of each recording (the source has no dates).");
    sec.appendChild(h("p", { class: "hint" }, notes.join(" ")));
    var ctx = canvas.getContext("2d");
    var W = 800, H = 300, LABEL_W = 200, dpr = 1, cov = null;

    function plotH() { return H - AXIS_H; }
    function totalH() { return T.rows * ROW_H; }
    function X(us) { return LABEL_W + (us - v0) / (v1 - v0) * (W - LABEL_W - 8); }
    function U(x) { return v0 + (x - LABEL_W) / (W - LABEL_W - 8) * (v1 - v0); }
    function clampView() {
      var span = v1 - v0, minSpan = 20, maxSpan = extent * 1.5;
      if (span < minSpan) { var c = (v0 + v1) / 2; v0 = c - minSpan / 2; v1 = c + minSpan / 2; span = minSpan; }
      if (span > maxSpan) { v0 = -extent * 0.02; v1 = v0 + maxSpan; span = maxSpan; }
      if (v0 < -span * 0.5) { v0 = -span * 0.5; v1 = v0 + span; }
      if (v1 > extent + span * 0.5) { v1 = extent + span * 0.5; v0 = v1 - span; }
      scrollY = Math.max(0, Math.min(scrollY, Math.max(0, totalH() - plotH())));
    }
    function resize() {
      var rect = box.getBoundingClientRect();
      dpr = window.devicePixelRatio || 1;
      W = Math.max(320, Math.floor(rect.width));
      H = Math.min(AXIS_H + totalH(), Math.max(260, Math.min(640, Math.floor(window.innerHeight * 0.7))));
      H = Math.max(H, AXIS_H + ROW_H);
      LABEL_W = Math.max(110, Math.min(230, Math.floor(W * 0.2)));
      canvas.width = Math.floor(W * dpr);
      canvas.height = Math.floor(H * dpr);
      canvas.style.height = H + "px";
      clampView();
      draw();
    }
    function firstVisible(r, t) {  // first position on row r from which a span may end at or after t
      var ends = rowMaxEnd[r], lo = 0, hi = ends.length;
      while (lo < hi) {
        var mid = (lo + hi) >> 1;
        if (ends[mid] < t) lo = mid + 1; else hi = mid;
      }
      return lo;
    }
    function draw() {
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      ctx.font = "11px " + getComputedStyle(document.body).fontFamily;
      ctx.textBaseline = "middle";
      var r0 = Math.floor(scrollY / ROW_H), r1 = Math.min(T.rows - 1, Math.floor((scrollY + plotH()) / ROW_H));
      var yOf = function (r) { return AXIS_H + r * ROW_H - scrollY; };
      ctx.save();
      ctx.beginPath(); ctx.rect(LABEL_W, AXIS_H, W - LABEL_W, H - AXIS_H); ctx.clip();
      // session backgrounds and extents
      T.sessions.forEach(function (ss, si) {
        if (ss.row0 + ss.rows - 1 < r0 || ss.row0 > r1) return;
        var y = yOf(ss.row0), hh = ss.rows * ROW_H;
        ctx.fillStyle = si % 2 ? "#fafbfc" : "#ffffff";
        ctx.fillRect(LABEL_W, y, W - LABEL_W, hh);
        if (isNum(ss.start) && isNum(ss.end)) {
          ctx.fillStyle = COLOR.agent;
          var xa = Math.max(LABEL_W - 2, X(ss.start)), xb = Math.min(W + 2, X(ss.end));
          if (xb > xa) ctx.fillRect(xa, y + 1, Math.max(1, xb - xa), hh - 2);
        }
      });
      // grid
      var step = timeStep(v1 - v0, Math.max(2, (W - LABEL_W) / 110));
      ctx.strokeStyle = "rgba(60,72,88,0.10)";
      ctx.lineWidth = 1;
      for (var tt = Math.ceil(v0 / step) * step; tt <= v1; tt += step) {
        var gx = Math.round(X(tt)) + 0.5;
        ctx.beginPath(); ctx.moveTo(gx, AXIS_H); ctx.lineTo(gx, H); ctx.stroke();
      }
      // spans: wider than 2 px drawn as snapped rectangles; narrower ones add their coverage to their pixel
      // columns, and each column is painted once in the kind that covers most of it (level of detail)
      var cols = Math.ceil(W) + 2;
      if (!cov || cov.length < cols * 5) cov = new Float32Array(cols * 5);
      for (var r = r0; r <= r1; r++) {
        var list = rows[r], y = yOf(r) + PAD, hgt = ROW_H - 2 * PAD, touched = [];
        for (var q = firstVisible(r, v0); q < list.length; q++) {
          var j = list[q];
          if (S.start[j] > v1) break;
          var k = S.kind[j];
          if (hidden[KINDS[k]] || S.start[j] + S.dur[j] < v0) continue;
          var x0 = X(S.start[j]), x1 = X(S.start[j] + S.dur[j]);
          if (x1 - x0 < 2) {
            var c0 = Math.max(0, Math.floor(x0)), c1 = Math.min(cols - 1, Math.floor(x1));
            for (var c = c0; c <= c1; c++) {
              var part = Math.min(x1, c + 1) - Math.max(x0, c);
              if (cov[c * 5] + cov[c * 5 + 1] + cov[c * 5 + 2] + cov[c * 5 + 3] + cov[c * 5 + 4] === 0) touched.push(c);
              cov[c * 5 + k] += Math.max(part, 0.3);
            }
            continue;
          }
          var xa = Math.round(x0), w = Math.max(1, Math.round(x1) - xa);
          ctx.globalAlpha = derived.has(j) ? 0.5 : 1;
          ctx.fillStyle = COLOR[KINDS[k]];
          ctx.fillRect(xa, y, w, hgt);
          if (errOf.has(j)) { ctx.fillStyle = COLOR.miss; ctx.fillRect(xa, y, w, 3); }
          if (w > 46) {
            var lx = Math.max(xa, LABEL_W) + 4, avail = Math.min(xa + w, W) - lx - 3;
            if (avail > 24) {
              ctx.fillStyle = k === 4 ? "#1c2430" : "#ffffff";
              ctx.globalAlpha = 1;
              ctx.fillText(clipText(T.names[S.name[j]], avail), lx, y + hgt / 2 + 0.5);
            }
          }
        }
        for (var t = 0; t < touched.length; t++) {
          var cc = touched[t], best = 0, total = 0;
          for (var kk = 0; kk < 5; kk++) { var v = cov[cc * 5 + kk]; total += v; if (v > cov[cc * 5 + best]) best = kk; }
          for (kk = 0; kk < 5; kk++) cov[cc * 5 + kk] = 0;
          ctx.globalAlpha = Math.min(1, 0.35 + total);
          ctx.fillStyle = COLOR[KINDS[best]];
          ctx.fillRect(cc, y, 1, hgt);
        }
      }
      ctx.globalAlpha = 1;
      ctx.restore();
      // labels column
      ctx.fillStyle = "#ffffff";
      ctx.fillRect(0, AXIS_H, LABEL_W, H - AXIS_H);
      ctx.save();
      ctx.beginPath(); ctx.rect(0, AXIS_H, LABEL_W, H - AXIS_H); ctx.clip();
      T.sessions.forEach(function (ss, si) {
        if (ss.row0 + ss.rows - 1 < r0 || ss.row0 > r1) return;
        var y = yOf(ss.row0);
        ctx.strokeStyle = "#e3e7ec";
        ctx.beginPath(); ctx.moveTo(0, Math.round(y) + 0.5); ctx.lineTo(W, Math.round(y) + 0.5); ctx.stroke();
        var indent = 8 + Math.min(ss.level, 6) * 12;
        ctx.fillStyle = ss.level ? "#4a5563" : "#1c2430";
        ctx.font = (ss.level ? "" : "600 ") + "11.5px " + getComputedStyle(document.body).fontFamily;
        var label = (ss.level ? "↳ " : "") + ss.label;
        ctx.fillText(clipText(label, LABEL_W - indent - 6), indent, y + ROW_H / 2 + 0.5);
        if (ss.rows > 1 || ss.role !== "main") {
          ctx.fillStyle = "#8a95a3";
          ctx.font = "10.5px " + getComputedStyle(document.body).fontFamily;
          var sub = ss.role + " · " + fmtInt(ss.calls) + " calls";
          if (ss.rows > 1) ctx.fillText(clipText(sub, LABEL_W - indent - 6), indent, y + ROW_H * 1.5);
        }
      });
      ctx.restore();
      ctx.strokeStyle = "#dde2e8";
      ctx.beginPath(); ctx.moveTo(LABEL_W + 0.5, AXIS_H); ctx.lineTo(LABEL_W + 0.5, H); ctx.stroke();
      // axis
      ctx.fillStyle = "#f7f9fb";
      ctx.fillRect(0, 0, W, AXIS_H);
      ctx.strokeStyle = "#dde2e8";
      ctx.beginPath(); ctx.moveTo(0, AXIS_H - 0.5); ctx.lineTo(W, AXIS_H - 0.5); ctx.stroke();
      ctx.fillStyle = "#4a5563";
      ctx.font = "11px " + getComputedStyle(document.body).fontFamily;
      ctx.textAlign = "center";
      for (var t2 = Math.ceil(v0 / step) * step; t2 <= v1; t2 += step) {
        var ax = X(t2);
        if (ax < LABEL_W + 14 || ax > W - 20) continue;
        ctx.fillText(fmtTick(t2, step), ax, AXIS_H / 2);
        ctx.beginPath(); ctx.moveTo(Math.round(ax) + 0.5, AXIS_H - 5); ctx.lineTo(Math.round(ax) + 0.5, AXIS_H); ctx.stroke();
      }
      ctx.textAlign = "left";
      ctx.fillStyle = "#6b7684";
      ctx.fillText("session", 8, AXIS_H / 2);
      ctx.textAlign = "right";
      ctx.fillText("time →", LABEL_W - 6, AXIS_H / 2);
      ctx.textAlign = "left";
      // vertical scroll indicator
      if (totalH() > plotH()) {
        var ph = plotH(), th = Math.max(20, ph * ph / totalH()), ty = AXIS_H + (ph - th) * scrollY / (totalH() - ph);
        ctx.fillStyle = "rgba(60,72,88,0.25)";
        ctx.fillRect(W - 5, ty, 4, th);
      }
    }
    var textWidthCache = new Map();
    function clipText(t, maxW) {
      t = String(t);
      var key = t + "\u0000" + Math.round(maxW) + ctx.font;
      var c = textWidthCache.get(key);
      if (c !== undefined) return c;
      var out = t;
      if (ctx.measureText(t).width > maxW) {
        var lo = 0, hi = t.length;
        while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (ctx.measureText(t.slice(0, mid) + "…").width <= maxW) lo = mid; else hi = mid - 1; }
        out = lo > 0 ? t.slice(0, lo) + "…" : "";
      }
      if (textWidthCache.size > 5000) textWidthCache.clear();
      textWidthCache.set(key, out);
      return out;
    }
    function zoomAt(x, factor) {
      var u = x >= LABEL_W ? U(x) : (v0 + v1) / 2;
      v0 = u - (u - v0) * factor;
      v1 = u + (v1 - u) * factor;
      clampView(); draw();
    }
    function panPx(dx) {
      var du = dx / (W - LABEL_W - 8) * (v1 - v0);
      v0 -= du; v1 -= du; clampView(); draw();
    }
    function hit(x, y) {
      if (x < LABEL_W || y < AXIS_H) return -1;
      var r = Math.floor((y - AXIS_H + scrollY) / ROW_H);
      if (r < 0 || r >= T.rows) return -1;
      var list = rows[r], tol = 3 / (W - LABEL_W - 8) * (v1 - v0), t = U(x);
      var q = firstVisible(r, t - tol), best = -1, bestD = Infinity;
      for (; q < list.length; q++) {
        var j = list[q];
        if (S.start[j] > t + tol) break;
        if (hidden[KINDS[S.kind[j]]]) continue;
        var d = t < S.start[j] ? S.start[j] - t : t > S.start[j] + S.dur[j] ? t - S.start[j] - S.dur[j] : 0;
        if (d < bestD) { bestD = d; best = j; }
      }
      return bestD <= tol ? best : -1;
    }
    function describe(j) {
      var ss = T.sessions[rowSession[S.row[j]]];
      var lines = [{ b: T.names[S.name[j]] }, { dim: KINDS[S.kind[j]] + " · " + ss.label }];
      lines.push({ t: "starts at " + fmtDur(S.start[j] / 1e6) + ", lasts " + fmtDur(S.dur[j] / 1e6) });
      if (agg.has(j)) lines.push({ dim: fmtInt(agg.get(j)) + " spans merged in this zoomed-out view" });
      var c = callOf.get(j);
      if (c !== undefined) {
        var C = T.calls, inp = C.input[c], cr = C.cache_read[c];
        var tok = "input " + fmtInt(inp);
        if (isNum(cr) && isNum(inp) && inp > 0) tok += " (cached " + fmtInt(cr) + ", " + fmtPct(cr / inp) + ")";
        tok += " · output " + fmtInt(C.output[c]);
        lines.push({ t: tok });
        if (isNum(C.ttft_ms[c])) lines.push({ t: "time to first token " + fmtDur(C.ttft_ms[c] / 1e3) });
      }
      if (errOf.has(j)) lines.push({ b: "error", t: errOf.get(j) });
      if (derived.has(j)) lines.push({ dim: "times inferred from neighbouring records" });
      var ti = textOf.get(j);
      if (ti !== undefined) {
        if (TX.input[ti]) lines.push({ pre: "prompt: " + TX.input[ti] });
        if (TX.output[ti]) lines.push({ pre: "response: " + TX.output[ti] });
      }
      return lines;
    }
    var drag = null;
    canvas.addEventListener("pointerdown", function (e) {
      drag = { x: e.clientX, y: e.clientY, sy: scrollY };
      canvas.setPointerCapture(e.pointerId);
      canvas.classList.add("drag");
      hideTip();
    });
    canvas.addEventListener("pointermove", function (e) {
      var rect = canvas.getBoundingClientRect(), x = e.clientX - rect.left, y = e.clientY - rect.top;
      if (drag) {
        panPx(e.clientX - drag.x);
        drag.x = e.clientX;
        scrollY = drag.sy - (e.clientY - drag.y);
        clampView(); draw();
        return;
      }
      var j = hit(x, y);
      if (j < 0) { hideTip(); return; }
      showTip(e.clientX, e.clientY, describe(j));
    });
    function endDrag() { drag = null; canvas.classList.remove("drag"); }
    canvas.addEventListener("pointerup", endDrag);
    canvas.addEventListener("pointercancel", endDrag);
    canvas.addEventListener("pointerleave", hideTip);
    canvas.addEventListener("wheel", function (e) {
      var rect = canvas.getBoundingClientRect();
      if (e.ctrlKey || e.metaKey || e.altKey) {
        e.preventDefault();
        zoomAt(e.clientX - rect.left, Math.exp(Math.max(-1, Math.min(1, e.deltaY / 300))));
      } else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
        e.preventDefault();
        panPx(-(e.shiftKey ? e.deltaY : e.deltaX));
      } else if (totalH() > plotH()) {
        var before = scrollY;
        scrollY += e.deltaY;
        clampView();
        if (scrollY !== before) { e.preventDefault(); draw(); }
      }
    }, { passive: false });
    canvas.addEventListener("dblclick", function (e) {
      var rect = canvas.getBoundingClientRect();
      zoomAt(e.clientX - rect.left, e.shiftKey ? 2 : 0.5);
    });
    canvas.addEventListener("keydown", function (e) {
      var handled = true;
      if (e.key === "+" || e.key === "=") zoomAt(W / 2 + LABEL_W / 2, 0.7);
      else if (e.key === "-" || e.key === "_") zoomAt(W / 2 + LABEL_W / 2, 1 / 0.7);
      else if (e.key === "ArrowLeft") panPx(80);
      else if (e.key === "ArrowRight") panPx(-80);
      else if (e.key === "ArrowUp") { scrollY -= ROW_H * 3; clampView(); draw(); }
      else if (e.key === "ArrowDown") { scrollY += ROW_H * 3; clampView(); draw(); }
      else if (e.key === "0") { v0 = 0; v1 = extent * 1.01; scrollY = 0; clampView(); draw(); }
      else handled = false;
      if (handled) e.preventDefault();
    });
    zoomIn.addEventListener("click", function () { zoomAt((W + LABEL_W) / 2, 0.5); });
    zoomOut.addEventListener("click", function () { zoomAt((W + LABEL_W) / 2, 2); });
    fit.addEventListener("click", function () { v0 = 0; v1 = extent * 1.01; scrollY = 0; clampView(); draw(); });
    if (window.ResizeObserver) new ResizeObserver(function () { resize(); }).observe(box);
    resize();
    // a hook for tests and power users: the current view in µs and the number of rows
    self.view = function () { return { v0: v0, v1: v1, rows: T.rows, scrollY: scrollY, labelW: LABEL_W, width: W, axisH: AXIS_H, rowH: ROW_H, plotW: W - LABEL_W - 8 }; };
    window.agentprofTimeline = self;
  }

  /* ---------- SVG charts ---------- */
  /* a chart's drawing width: the space its panel gives it (600–1000 units), so text keeps its size on a narrow
     screen instead of shrinking with a wide drawing */
  function fitWidth(sec) {
    var w = sec && sec.clientWidth ? sec.clientWidth - 36 : 1000;
    return Math.round(Math.max(600, Math.min(1000, w)));
  }
  function chartFrame(width, height, m) {
    var svg = s("svg", { viewBox: "0 0 " + width + " " + height, preserveAspectRatio: "xMidYMid meet", role: "img" });
    return { svg: svg, w: width - m.l - m.r, h: height - m.t - m.b, m: m };
  }
  function axisLeft(f, y, tks, fmt, label) {
    var g = s("g", { class: "axis" });
    tks.forEach(function (v) {
      var yy = f.m.t + y(v);
      g.appendChild(s("line", { x1: f.m.l, x2: f.m.l + f.w, y1: yy, y2: yy, stroke: "#eef1f4" }));
      g.appendChild(s("text", { x: f.m.l - 6, y: yy + 3.5, "text-anchor": "end" }, fmt(v)));
    });
    if (label) g.appendChild(s("text", { x: 12, y: f.m.t + f.h / 2, transform: "rotate(-90 12 " + (f.m.t + f.h / 2) + ")", "text-anchor": "middle" }, label));
    f.svg.appendChild(g);
  }
  function axisBottom(f, x, tks, fmt, label) {
    var g = s("g", { class: "axis" });
    g.appendChild(s("line", { x1: f.m.l, x2: f.m.l + f.w, y1: f.m.t + f.h, y2: f.m.t + f.h }));
    tks.forEach(function (v) {
      var xx = f.m.l + x(v);
      g.appendChild(s("line", { x1: xx, x2: xx, y1: f.m.t + f.h, y2: f.m.t + f.h + 4 }));
      g.appendChild(s("text", { x: xx, y: f.m.t + f.h + 16, "text-anchor": "middle" }, fmt(v)));
    });
    if (label) g.appendChild(s("text", { x: f.m.l + f.w / 2, y: f.m.t + f.h + 32, "text-anchor": "middle" }, label));
    f.svg.appendChild(g);
  }
  function pathOf(xs, ys, x, y, f) {
    var d = "", pen = false;
    for (var i = 0; i < xs.length; i++) {
      if (!isNum(ys[i])) { pen = false; continue; }
      d += (pen ? "L" : "M") + (f.m.l + x(xs[i])).toFixed(1) + "," + (f.m.t + y(ys[i])).toFixed(1);
      pen = true;
    }
    return d;
  }
  function legendRow(items) {
    return h("div", { class: "legend" }, items.map(function (it) {
      return h("span", { class: "item" }, [h("span", { class: "swatch", style: { background: it.color, opacity: it.opacity || 1 } }), it.label]);
    }));
  }

  /* ---------- redundancy ---------- */
  function renderRedundancy() {
    var R = D.redundancy || {};
    var sec = panel("redundancy", "Prompt redundancy per call",
      "Per model call: the share of its prompt that repeats an earlier prompt (what a prefix cache could serve) and the share the provider served from its cache. Marked calls are cache misses, explained below.");
    if (R.status !== "ok") { missing(sec, R.reason || "the redundancy analysis is not in this report"); return; }
    var sum = R.summary || {};
    var cards = h("div", { class: "cards", style: { marginBottom: "12px" } });
    [["prefix_reuse_prev", "Prompt equal to the previous prompt", COLOR.reuse],
      ["session_hit_rate", "Per-conversation hit rate (kv-cache-tester)", null],
      ["provider_cache_read_share", "Provider cache read share, mean of calls", COLOR.cached]].forEach(function (it) {
      var d = sum[it[0]];
      if (!d) return;
      cards.appendChild(card(it[1], fmtPct(d.mean), isNum(d.median) ? "median " + fmtPct(d.median) + " · p10 " + fmtPct(d.p10) + " · p90 " + fmtPct(d.p90) : "not available", it[2], !isNum(d.mean)));
    });
    if (R.conversations !== undefined) cards.appendChild(card("Conversations", fmtInt(R.conversations), fmtInt(R.n_calls) + " model calls"));
    sec.appendChild(cards);
    var sessions = R.sessions || [];
    if (!sessions.length) { missing(sec, R.sessions_reason || "no model call carries per-call redundancy figures"); }
    else {
      var sel = h("select", { "aria-label": "session" }, sessions.map(function (ss, i) {
        return h("option", { value: String(i) }, ss.label + " — " + fmtInt(ss.x.length) + " calls");
      }));
      var holder = h("div", { class: "chart" });
      sec.appendChild(h("div", { class: "toolbar" }, [h("label", { class: "hint" }, "Session "), sel]));
      sec.appendChild(holder);
      var draw = function () { holder.textContent = ""; redundancyChart(holder, sessions[+sel.value], R); };
      sel.addEventListener("change", draw);
      draw();
    }
    var misses = R.misses || [];
    sec.appendChild(h("h3", { class: "sub" }, "Cache misses and their likely causes" + (misses.length ? " (" + fmtInt(R.n_misses || misses.length) + ")" : "")));
    if (!misses.length) { sec.appendChild(h("p", { class: "hint" }, R.misses_reason || "No miss was found: every call's reusable prefix reached the end of the previous prompt.")); return; }
    var tb = h("tbody");
    misses.forEach(function (m) {
      tb.appendChild(h("tr", null, [
        h("td", { class: "ell", title: m.session }, m.session), h("td", { class: "r" }, fmtInt(m.call)),
        h("td", null, [h("span", { class: "tag err" }, m.cause)].concat((m.others || []).map(function (o) { return h("span", { class: "tag", style: { marginLeft: "4px" } }, o); }))
          .concat([h("div", { class: "muted small" }, "first diverging: " + (m.where || "—"))])),
        h("td", { class: "r" }, fmtTok(m.prompt_tokens)), h("td", { class: "r" }, fmtTok(m.reusable_tokens)), h("td", { class: "r" }, fmtTok(m.cached_tokens)),
        h("td", { class: "detail" }, [m.detail ? h("div", null, m.detail) : null, m.fix ? h("div", { class: "fix" }, [h("b", null, "Fix: "), m.fix]) : null]),
      ]));
    });
    sec.appendChild(h("div", { class: "scroll" }, h("table", { class: "t" }, [
      h("thead", null, h("tr", null, [h("th", null, "session"), h("th", { class: "r" }, "call"), h("th", null, "cause and first diverging block"),
        h("th", { class: "r" }, "prompt (est.)"), h("th", { class: "r" }, "reusable (est.)"), h("th", { class: "r" }, "cached (provider)"), h("th", null, "detail and fix")])), tb])));
    sec.appendChild(details("units", "Units of the token columns", [h("p", null, "Prompt and reusable are tokens estimated offline with " + ((D.meta || {}).tokenizer || "agentprof's tokenizer") +
      " (reusable in whole " + fmtInt((D.meta || {}).block_size || 64) + "-token blocks, against the best earlier prompt); cached is the provider's own count of tokens read from its cache. " +
      "The two tokenizers differ, so reusable can exceed the estimated prompt, and cached can exceed reusable.")]));
    if (R.n_misses > misses.length) sec.appendChild(h("p", { class: "hint" }, "Showing the first " + fmtInt(misses.length) + " of " + fmtInt(R.n_misses) + " misses."));
  }

  function redundancyChart(holder, ss, R) {
    var f = chartFrame(fitWidth(holder.closest("section")), 300, { l: 52, r: 58, t: 12, b: 40 });
    var nx = ss.x.length, xmax = Math.max(1, ss.x[nx - 1] || nx);
    // calls sit in the middle of equal slots (half a slot of room at each end), so bars never leave the plot
    var x = function (v) { return (v - 0.5) / xmax * f.w; };
    var y = function (v) { return f.h - v * f.h; };
    var inp = ss.input || [], imax = 0;
    inp.forEach(function (v) { if (isNum(v) && v > imax) imax = v; });
    if (imax > 0) {  // prompt size as faint bars on the right axis
      var bw = Math.max(0.5, Math.min(f.w / xmax * 0.7, 60)), g = s("g");
      for (var i = 0; i < nx; i++) if (isNum(inp[i])) {
        var bh = inp[i] / imax * f.h, bx = Math.max(f.m.l, f.m.l + x(ss.x[i]) - bw / 2);
        g.appendChild(s("rect", { x: bx, y: f.m.t + f.h - bh, width: Math.min(bw, f.m.l + f.w - bx), height: bh, fill: "#e9edf2" }));
      }
      f.svg.appendChild(g);
      var ra = s("g", { class: "axis" });
      ticks(0, imax, 4).forEach(function (v) {
        ra.appendChild(s("text", { x: f.m.l + f.w + 6, y: f.m.t + f.h - v / imax * f.h + 3.5, "text-anchor": "start" }, fmtTok(v)));
      });
      ra.appendChild(s("text", { x: f.m.l + f.w + 46, y: f.m.t + f.h / 2, transform: "rotate(90 " + (f.m.l + f.w + 46) + " " + (f.m.t + f.h / 2) + ")", "text-anchor": "middle" }, "prompt tokens" + (ss.input_unit === "estimated" ? " (est.)" : "")));
      f.svg.appendChild(ra);
    }
    axisLeft(f, y, [0, 0.25, 0.5, 0.75, 1], function (v) { return (v * 100).toFixed(0) + "%"; }, "share of prompt tokens");
    axisBottom(f, x, ticks(1, xmax, 10).filter(function (v) { return v >= 1 && Math.round(v) === v; }), fmtInt, "model call in session");
    var series = [
      { key: "reusable", label: "reusable from an earlier prompt", color: COLOR.reuse, width: 2 },
      { key: "reuse_prev", label: "equal to the previous prompt's prefix", color: "#7aa6cf", width: 1.2, dash: "4 3" },
      { key: "cached", label: "served from the provider cache", color: COLOR.cached, width: 2 },
    ];
    var shown = [];
    series.forEach(function (sr) {
      var ys = ss[sr.key];
      if (!ys || !ys.some(isNum)) return;
      shown.push(sr);
      f.svg.appendChild(s("path", { d: pathOf(ss.x, ys, x, y, f), fill: "none", stroke: sr.color, "stroke-width": sr.width, "stroke-dasharray": sr.dash || null, "stroke-linejoin": "round" }));
    });
    (ss.misses || []).forEach(function (m) {
      var i = m.index, cx = f.m.l + x(ss.x[i]);
      var yy = isNum((ss.reusable || [])[i]) ? f.m.t + y(ss.reusable[i]) : f.m.t + 6;
      var tri = s("path", { d: "M" + cx + "," + (yy - 9) + "l-5,-8h10z", fill: COLOR.miss });
      titled(tri, "call " + ss.x[i] + ": " + m.cause);
      f.svg.appendChild(tri);
    });
    var hover = s("rect", { x: f.m.l, y: f.m.t, width: f.w, height: f.h, fill: "transparent" });
    hover.addEventListener("mousemove", function (e) {
      var box = f.svg.getBoundingClientRect(), px = (e.clientX - box.left) / box.width * (f.w + f.m.l + f.m.r) - f.m.l;
      var v = 0.5 + px / f.w * xmax, best = 0, bd = Infinity;
      for (var i = 0; i < nx; i++) { var d = Math.abs(ss.x[i] - v); if (d < bd) { bd = d; best = i; } }
      var lines = [{ b: "call " + ss.x[best] }];
      if (isNum(inp[best])) lines.push({ t: "prompt " + fmtInt(inp[best]) + " tokens" + (ss.input_unit ? " (" + ss.input_unit + ")" : "") });
      shown.forEach(function (sr) { lines.push({ t: sr.label + ": " + fmtPct(ss[sr.key][best]) }); });
      (ss.misses || []).forEach(function (m) { if (m.index === best) lines.push({ b: "miss", t: m.cause }); });
      showTip(e.clientX, e.clientY, lines);
    });
    hover.addEventListener("mouseleave", hideTip);
    f.svg.appendChild(hover);
    holder.appendChild(f.svg);
    var items = shown.map(function (sr) { return { color: sr.color, label: sr.label }; });
    items.push({ color: COLOR.miss, label: "cache miss" });
    if (imax > 0) items.push({ color: "#e1e6ec", label: "prompt size (right axis, tokens " + (ss.input_unit || "") + ")" });
    holder.appendChild(legendRow(items));
  }

  /* ---------- cache panel ---------- */
  function renderCache() {
    var C = D.cache || {};
    var sec = panel("cache", "KV cache: hit rate against capacity",
      "Simulated token hit rate of a prefix KV cache (LMCache behaviour) for each tier as its capacity grows, with the sessions interleaved on their recorded times.");
    if (C.status !== "ok") { missing(sec, C.reason || "no cache simulation in this report"); return; }
    var f = chartFrame(fitWidth(sec), 300, { l: 52, r: 40, t: 14, b: 42 });  // room for the last tick label
    var all = [];
    C.tiers.forEach(function (t) { t.capacity_bytes.forEach(function (b) { if (b > 0) all.push(b); }); });
    var lo = Math.min.apply(null, all), hi = Math.max.apply(null, all);
    if (!(hi > lo)) hi = lo * 10;
    var lx = function (b) { return (Math.log10(b) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo)) * f.w; };
    var y = function (v) { return f.h - v * f.h; };
    axisLeft(f, y, [0, 0.25, 0.5, 0.75, 1], function (v) { return (v * 100).toFixed(0) + "%"; }, "token hit rate");
    var dt = [];
    for (var e = Math.ceil(Math.log10(lo)); e <= Math.floor(Math.log10(hi)); e++) dt.push(Math.pow(10, e));
    if (dt.length < 2) dt = [lo, hi];
    axisBottom(f, lx, dt, fmtBytes, "cache capacity (" + (C.model || "model") + ", KV bytes)");
    var items = [];
    C.tiers.forEach(function (t, i) {
      var col = SERIES[i % SERIES.length];
      if (isNum(t.unlimited)) {
        var yu = f.m.t + y(t.unlimited);
        f.svg.appendChild(s("line", { x1: f.m.l, x2: f.m.l + f.w, y1: yu, y2: yu, stroke: col, "stroke-dasharray": "5 4", opacity: 0.6 }));
        if (i === 0) f.svg.appendChild(s("text", { x: f.m.l + 6, y: yu - 5 }, "dashed: unlimited capacity"));
      }
      f.svg.appendChild(s("path", { d: pathOf(t.capacity_bytes, t.hit_rate, lx, y, f), fill: "none", stroke: col, "stroke-width": 2 }));
      t.capacity_bytes.forEach(function (b, k) {
        if (!isNum(t.hit_rate[k])) return;
        var dot = s("circle", { cx: f.m.l + lx(b), cy: f.m.t + y(t.hit_rate[k]), r: 3, fill: col });
        titled(dot, t.name + ": " + fmtBytes(b) + " → " + fmtPct(t.hit_rate[k]));
        f.svg.appendChild(dot);
      });
      if (isNum(t.knee_bytes) && t.knee_bytes > 0) {  // a zero knee (nothing to hit) has no place on a log axis
        var kx = f.m.l + lx(t.knee_bytes);
        f.svg.appendChild(s("line", { x1: kx, x2: kx, y1: f.m.t, y2: f.m.t + f.h, stroke: col, "stroke-dasharray": "2 3", opacity: 0.7 }));
      }
      items.push({ color: col, label: t.name + ": unlimited " + fmtPct(t.unlimited) + (isNum(t.knee_bytes) ? ", 90 % of that at " + fmtBytes(t.knee_bytes) : "") });
    });
    sec.appendChild(h("div", { class: "chart" }, f.svg));
    sec.appendChild(legendRow(items));
    if (C.note) sec.appendChild(h("p", { class: "hint" }, C.note));
    sec.appendChild(details("tiers", "Reading one curve for several tiers", [h("p", null, "An LRU hierarchy keeps the most recently used prefixes in its fastest tier: with HBM of size A in front of CPU memory of size B, HBM serves the hits the curve shows at A, and the CPU tier adds those between A and A + B.")]));
  }


  /* ---------- serving: many sessions on one system ---------- */
  var SV_BAND = { ttft_p99_s: "serving_ttft_p99_s", tasks_per_hour: "serving_tasks_per_hour" };
  function svBand(r, key) {  // [low, high] of a system's band for this series at the largest concurrency, or null
    var b = r.band && r.band[SV_BAND[key]];
    if (!b || !isNum(b[0]) || !isNum(b[1])) return null;
    return [Math.min(b[0], b[1]), Math.max(b[0], b[1])];
  }
  function servingChart(V, key, label, logY, fmt) {
    var f = chartFrame(480, 260, { l: 76, r: 14, t: 12, b: 42 });
    var conc = V.concurrency, vals = [];
    V.systems.forEach(function (r) {
      (r[key] || []).forEach(function (v) { if (isNum(v) && (!logY || v > 0)) vals.push(v); });
      (svBand(r, key) || []).forEach(function (v) { if (!logY || v > 0) vals.push(v); });
    });
    if (!vals.length) return null;
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    var cx0 = Math.log(conc[0]), cx1 = Math.log(conc[conc.length - 1]);
    if (!(cx1 > cx0)) cx1 = cx0 + 1;
    var x = function (n) { return (Math.log(n) - cx0) / (cx1 - cx0) * f.w; };
    var y, tks;
    if (logY) {
      var e0 = Math.floor(Math.log10(lo)), e1 = Math.ceil(Math.log10(hi));
      if (e1 <= e0) e1 = e0 + 1;
      y = function (v) { return f.h - (Math.log10(Math.max(v, Math.pow(10, e0))) - e0) / (e1 - e0) * f.h; };
      tks = []; for (var e = e0; e <= e1; e++) tks.push(Math.pow(10, e));
    } else {
      hi = hi > 0 ? hi * 1.1 : 1;
      y = function (v) { return f.h - v / hi * f.h; };
      tks = ticks(0, hi, 5);
    }
    axisLeft(f, y, tks, logY ? fmtRound : fmt, label);  // round tick labels (1 s, 10 s, 100 s)
    axisBottom(f, x, conc, function (n) { return String(n); }, "concurrent sessions");
    V.systems.forEach(function (r, i) {
      if (!r[key]) return;
      var col = SERIES[i % SERIES.length];
      f.svg.appendChild(s("path", { d: pathOf(conc, r[key], x, y, f), fill: "none", stroke: col, "stroke-width": 2 }));
      conc.forEach(function (n, k) {
        var v = r[key][k];
        if (!isNum(v)) return;
        var dot = s("circle", { cx: f.m.l + x(n), cy: f.m.t + y(v), r: 3.5, fill: col, class: "sv-dot" });
        titled(dot, r.system + " at " + n + ": " + label + " " + fmt(v));
        f.svg.appendChild(dot);
      });
      // the band at the largest concurrency: every ranged estimate at its fast and at its slow end
      var bd = svBand(r, key), bn = r.band && r.band.concurrency;
      if (bd && isNum(bn) && (!logY || bd[0] > 0)) {
        var bx = f.m.l + x(bn) - 5 - 5 * i;  // left of the last dots, inside the plot
        var bar = s("line", { x1: bx, x2: bx, y1: f.m.t + y(bd[0]), y2: f.m.t + y(bd[1]), stroke: col, "stroke-width": 2,
                              "stroke-dasharray": "3 2", class: "sv-band" });
        titled(bar, r.system + " at " + bn + ", band (every ranged estimate at its fast / slow end): " + label + " " + fmt(bd[0]) + " – " + fmt(bd[1]));
        f.svg.appendChild(bar);
      }
    });
    return f.svg;
  }
  // a band's moved catalog numbers, each with its evidence class (measured, vendor, seed, estimate)
  function rangedText(names, ev) {
    return names.map(function (n) { return ev && ev[n] ? n + " [" + ev[n] + "]" : n; }).join(", ");
  }

  function renderServing() {
    var V = D.serving || {};
    var sec = panel("serving", "Serving many sessions",
      "The sessions replayed together on each system (continuous batching, a shared prefix cache): TTFT p99 and finished tasks per hour against the number of concurrent sessions.");
    if (V.status !== "ok") { missing(sec, V.reason || "no serving simulation in this report"); return; }
    sec.appendChild(h("p", { class: "hint" }, fmtInt(V.sessions) + " session(s) served as " + V.model + "."));
    if (V.cache) sec.appendChild(details("sv-cache", "Cache tiers each system ran with", [h("p", null, V.cache + ".")]));
    var later = [];
    if (V.not_simulated && V.not_simulated.reason) later.push(V.not_simulated.reason + ".");
    if (typeof V.bands === "string") later.push("Ranges for systems resting on estimates: " + V.bands + ".");
    var row = h("div", { class: "sv-charts" });
    var a = servingChart(V, "ttft_p99_s", "TTFT p99", true, function (v) { return fmtDur(v); });
    var b = servingChart(V, "tasks_per_hour", "tasks / hour", false, function (v) { return v >= 10 ? v.toFixed(0) : v.toFixed(1); });
    if (a) row.appendChild(h("div", { class: "chart sv-ttft" }, a));
    if (b) row.appendChild(h("div", { class: "chart sv-tph" }, b));
    sec.appendChild(row);
    sec.appendChild(legendRow(V.systems.map(function (r, i) { return { color: SERIES[i % SERIES.length], label: r.system + (r.error ? " (not served: " + r.error + ")" : "") }; })));
    var head = h("tr", null, [h("th", null, "system")].concat(V.concurrency.map(function (n) { return h("th", { class: "r" }, String(n)); })));
    var body = V.systems.map(function (r) {
      return h("tr", null, [h("td", null, r.system)].concat(V.concurrency.map(function (n, k) {
        if (r.error) return h("td", { class: "r muted" }, "—");
        return h("td", { class: "r" }, [h("div", null, fmtDur(r.ttft_p99_s[k])), h("div", { class: "muted" }, (isNum(r.tasks_per_hour[k]) ? r.tasks_per_hour[k].toFixed(1) + "/h" : "—") + " · hits " + fmtPct(r.hit_share[k], 0))]);
      })));
    });
    if (later.length) sec.appendChild(h("p", { class: "hint sv-more" }, later.join(" ")));
    sec.appendChild(h("table", { class: "t sv-table" }, [h("caption", null, "TTFT p99, then tasks per hour and prompt tokens served from cache, by concurrent sessions"), h("thead", null, head), h("tbody", null, body)]));
    V.systems.filter(function (r) { return r.beyond; }).forEach(function (r) {
      sec.appendChild(h("p", { class: "hint sv-beyond" }, r.system + " at " + V.concurrency[V.concurrency.length - 1] + ": " + r.beyond));
    });
    var bands = V.systems.filter(function (r) { return r.band && r.band.ranged; }).map(function (r) {
      var b = r.band, lo = function (k) { return Math.min(b[k][0], b[k][1]); }, hi = function (k) { return Math.max(b[k][0], b[k][1]); };
      var ok = function (k) { return b[k] && isNum(b[k][0]) && isNum(b[k][1]); };
      return h("li", null, [r.system + " at " + b.concurrency + " sessions: TTFT p50 " + (ok("serving_ttft_p50_s") ? fmtDur(lo("serving_ttft_p50_s")) + " – " + fmtDur(hi("serving_ttft_p50_s")) : "—") +
        ", p99 " + (ok("serving_ttft_p99_s") ? fmtDur(lo("serving_ttft_p99_s")) + " – " + fmtDur(hi("serving_ttft_p99_s")) : "—") +
        ", tasks/hour " + (ok("serving_tasks_per_hour") ? lo("serving_tasks_per_hour").toFixed(1) + " – " + hi("serving_tasks_per_hour").toFixed(1) : "—"),
        h("div", { class: "mono small muted" }, "ranged: " + rangedText(b.ranged, b.evidence))]);
    });
    if (bands.length) sec.appendChild(details("sv-bands", "Ranges (dashed bars): every estimate at its fast and at its slow end", [h("ul", null, bands)]));
    var last = V.concurrency[V.concurrency.length - 1];
    V.systems.filter(function (r) { return r.why; }).forEach(function (r) {
      sec.appendChild(details("sv-why", "Why: " + r.system + " at " + last + " sessions", [sentences(r.why)]));
    });
    // a slow system's deployment levers, each simulated on the same sessions (the why line's figures, as a table)
    V.systems.forEach(function (r) {
      var lv = r.levers;
      if (!lv || !lv.tried || !lv.tried.length) return;
      var n = V.concurrency[V.concurrency.length - 1];
      var lhead = h("tr", null, ["lever", "TTFT p50", "TTFT p99", "hits HBM / CPU", "layout", "KV pool", "tasks / hour"].map(function (t, i) { return h("th", i ? { class: "r" } : null, t); }));
      var lbody = lv.tried.map(function (t) {
        if (t.error) return h("tr", null, [h("td", null, t.flag), h("td", { class: "muted", colspan: "6" }, "cannot run: " + t.error)]);
        return h("tr", t.slow ? { class: "muted" } : null, [h("td", null, t.flag), h("td", { class: "r", title: isNum(t.ttft_p50_s) ? t.ttft_p50_s.toFixed(3) + " s" : null }, fmtDur(t.ttft_p50_s)),
          h("td", { class: "r" }, fmtDur(t.ttft_p99_s)), h("td", { class: "r" }, fmtPct(t.hit_share_hbm, 0) + " / " + fmtPct(t.hit_share_cpu, 0)),
          h("td", { class: "r" }, t.layout === "dp" ? "data-parallel" : "tensor-parallel"),
          h("td", { class: "r" }, isNum(t.kv_pool_tokens_per_system) ? (t.kv_pool_tokens_per_system / 1e6).toFixed(2) + "M tokens" : "—"),
          h("td", { class: "r" }, isNum(t.tasks_per_hour) ? t.tasks_per_hour.toFixed(1) : "—")]);
      });
      var cap = r.system + " at " + n + " sessions (TTFT p50 " + fmtDur(lv.ttft_p50_s) + ", " + fmtPct(lv.hit_share, 0) + " of prompt tokens cached): what would change it (grey: still 10 s or more)";
      var hk = lv.hold_kv || {}, foot = [];
      if (isNum(hk.instances)) {
        foot.push(h("tr", null, [h("td", { colspan: "7", class: "muted" }, "Holding the sessions' " + (hk.kv_demand_tokens / 1e6).toFixed(2) + "M tokens of KV in HBM takes " +
          hk.instances + " instance(s) of " + hk.accelerators_per_instance + " (" + hk.accelerators + " accelerators) at " + hk.kv_dtype +
          (isNum(hk.instances_fp8) ? ", " + hk.instances_fp8 + " (" + hk.accelerators_fp8 + ") at fp8" : "") + " (arithmetic, not simulated).")]));
      }
      sec.appendChild(h("table", { class: "t sv-levers" }, [h("caption", null, cap), h("thead", null, lhead), h("tbody", null, lbody), h("tfoot", null, foot)]));
    });
  }

  /* ---------- measured on your backend: agentprof loadtest results (rows of text made once, in Python) ---------- */
  function renderMeasured() {
    var M = D.measured;
    if (!M || M.status !== "ok") return;
    var sec = panel("measured", "Measured on your backend",
      "Recorded sessions replayed against a real endpoint by agentprof loadtest: what the server delivered and, where a prediction was asked for, the device model's figures for the same sessions beside them.");
    M.runs.forEach(function (r) {
      var box = h("div", { class: "lt-run" }, [h("h3", { class: "sub" }, (r.label ? r.label + ": " : "") + r.head)]);
      if (r.sources) box.appendChild(h("p", { class: "hint" }, "Trace files: " + r.sources + "."));
      box.appendChild(h("p", { class: "lt-counts" }, r.counts));
      var head = h("tr", null, r.columns.map(function (c, i) { return h("th", i ? { class: "r" } : null, c); }));
      var body = r.rows.map(function (row) {
        return h("tr", null, row.cells.map(function (c, i) { return h("td", i ? { class: "r" } : null, c); }));
      });
      box.appendChild(h("table", { class: "t lt-table" }, [h("thead", null, head), h("tbody", null, body)]));
      var n = r.notes || [];
      if (n.length) box.appendChild(details("lt-notes", "About these figures (" + n.length + (n.length === 1 ? " note)" : " notes)"), [h("ul", null, n.map(function (t) { return h("li", null, t); }))]));
      sec.appendChild(box);
    });
  }
  /* ---------- device what-if ---------- */
  function renderWhatIf() {
    var W = D.whatif || {};
    var sec = panel("whatif", "Device what-if",
      "The same task replayed on each system: model calls follow the hardware, tools and orchestration the host CPU where they are CPU-bound; waits do not move.");
    if (W.status !== "ok") { missing(sec, W.reason || "no replay in this report"); return; }
    var rowsD = W.rows || [];
    var max = 0;
    rowsD.forEach(function (r) { var t = (r.model_s || 0) + (r.tool_s || 0) + (r.orchestration_s || 0) + (r.wait_s || 0); if (t > max) max = t; if (isNum(r.e2e_s) && r.e2e_s > max) max = r.e2e_s; });
    if (!(max > 0)) { missing(sec, "the replay has no timed work to compare (the trace has no usable times)"); return; }
    var rowH = 34, f = chartFrame(fitWidth(sec), 60 + rowH * rowsD.length, { l: 110, r: 250, t: 22, b: 38 });
    var x = function (v) { return v / max * f.w; };
    axisBottom(f, x, durTicks(0, max, 6), fmtRound, "task time");
    var parts = [["model_s", "model", COLOR.model], ["tool_s", "tool", COLOR.tool], ["orchestration_s", "orchestration", COLOR.orchestration], ["wait_s", "wait", COLOR.wait]];
    rowsD.forEach(function (r, i) {
      var yy = f.m.t + i * rowH + 6, acc = 0;
      var lab = s("text", { x: f.m.l - 8, y: yy + 13, "text-anchor": "end", class: i === 0 ? "title" : null }, r.name);
      if (r.display) titled(lab, r.display);
      f.svg.appendChild(lab);
      if (r.error) { f.svg.appendChild(s("text", { x: f.m.l + 4, y: yy + 13, fill: "#a03a00" }, "not replayed: " + r.error)); return; }
      parts.forEach(function (p) {
        var v = r[p[0]];
        if (!isNum(v) || v <= 0) return;
        var rect = s("rect", { x: f.m.l + x(acc), y: yy, width: Math.max(0.5, x(v)), height: rowH - 12, fill: p[2] });
        titled(rect, r.name + " · " + p[1] + ": " + fmtDur(v) + (isNum(r.e2e_s) && r.e2e_s > 0 ? " (" + fmtPct(v / r.e2e_s) + ")" : ""));
        f.svg.appendChild(rect);
        acc += v;
      });
      // two short lines in the right margin, so a band never pushes the label past the plot
      var right = fmtDur(isNum(r.e2e_s) ? r.e2e_s : acc), second = [];
      if (isNum(r.speedup) && i > 0) right += " · task " + fmtX(r.speedup);
      var bnd = (r.band || {}).speedup_vs_recorded;
      if (bnd && isNum(bnd[0]) && isNum(bnd[1]) && i > 0) second.push("band " + fmtX(Math.min(bnd[0], bnd[1])) + "–" + fmtX(Math.max(bnd[0], bnd[1])));
      if (isNum(r.model_speedup) && i > 0) second.push("model calls " + fmtX(r.model_speedup));
      f.svg.appendChild(s("text", { x: f.m.l + x(acc) + 6, y: yy + (second.length ? 9 : 13) }, right));
      if (second.length) {
        var sec2 = s("text", { x: f.m.l + x(acc) + 6, y: yy + 21, class: "hint" }, second.join(", "));
        if (r.band_ranged && r.band_ranged.length) titled(sec2, r.name + " band: every ranged estimate at its fast / slow end (" + rangedText(r.band_ranged, r.band_evidence) + ")");
        f.svg.appendChild(sec2);
      }
    });
    if (isNum(W.amdahl_bound_s) && W.amdahl_bound_s > 0 && W.amdahl_bound_s <= max) {
      var ax = f.m.l + x(W.amdahl_bound_s);
      f.svg.appendChild(s("line", { x1: ax, x2: ax, y1: f.m.t, y2: f.m.t + f.h, stroke: "#d55e00", "stroke-dasharray": "5 4" }));
      f.svg.appendChild(s("text", { x: Math.min(ax + 4, f.m.l + f.w - 160), y: f.m.t - 6, fill: "#d55e00" }, "Amdahl bound " + fmtDur(W.amdahl_bound_s) + (isNum(W.amdahl_ratio) ? " (" + fmtX(W.amdahl_ratio) + ")" : "")));
    }
    sec.appendChild(h("div", { class: "chart" }, f.svg));
    sec.appendChild(legendRow(parts.map(function (p) { return { color: p[2], label: p[1] }; })));
    renderWaitingFor(sec, rowsD);
    // what each band rests on: the estimates it moved (catalog ranges, the deployment's estimated CPU tier)
    var banded = rowsD.filter(function (r) { return r.band_ranged && r.band_ranged.length && r.band && r.band.e2e_s; });
    var causes = {};
    (((D.answer || {}).systems) || []).forEach(function (a) { causes[a.name] = a.band_causes; });
    if (banded.length) sec.appendChild(details("wi-bands", "Ranges: task time with every estimate at its fast and its slow end", [h("ul", null, banded.map(function (r) {
      var e = r.band.e2e_s, m = r.band.model_calls_s || [];
      return h("li", null, [r.name + ": task " + fmtDur(Math.min(e[0], e[1])) + " – " + fmtDur(Math.max(e[0], e[1])) +
        (isNum(m[0]) && isNum(m[1]) ? ", model calls " + fmtDur(Math.min(m[0], m[1])) + " – " + fmtDur(Math.max(m[0], m[1])) : "") +
        (causes[r.name] ? "; " + causes[r.name] : "") + ".", h("div", { class: "mono small muted" }, rangedText(r.band_ranged, r.band_evidence))]);
    }))]));
    var wn = uniq(W.notes || []);
    if (wn.length) sec.appendChild(details("wi-notes", "About these figures (" + wn.length + (wn.length === 1 ? " note)" : " notes)"), [h("ul", null, wn.map(function (n) { return h("li", null, n); }))]));
  }

  /* what each system's model calls wait for (replay waiting_for: the parts sum to the model-call time) */
  function renderWaitingFor(sec, rowsD) {
    var wf = rowsD.filter(function (r) { return r.waiting_for && Object.keys(r.waiting_for).length; });
    if (!wf.length) return;
    var kinds = [["compute", "compute", "#0072b2"], ["bandwidth", "weight/KV bandwidth", "#56b4e9"], ["overhead", "fixed overhead", "#e69f00"],
      ["kv_load", "KV load from lower tiers", "#009e73"], ["queueing", "queueing", "#cc79a7"]];
    var max = 0;
    wf.forEach(function (r) { var t = 0; kinds.forEach(function (k) { t += r.waiting_for[k[0]] || 0; }); if (t > max) max = t; });
    if (!(max > 0)) return;
    var rowH = 30, f = chartFrame(fitWidth(sec), 46 + rowH * wf.length, { l: 110, r: 250, t: 8, b: 38 });
    var x = function (v) { return v / max * f.w; };
    axisBottom(f, x, durTicks(0, max, 6), fmtRound, "model-call time by what it waits for");
    wf.forEach(function (r, i) {
      var yy = f.m.t + i * rowH + 4, acc = 0, tot = 0;
      kinds.forEach(function (k) { tot += r.waiting_for[k[0]] || 0; });
      f.svg.appendChild(s("text", { x: f.m.l - 8, y: yy + 13, "text-anchor": "end" }, r.name));
      kinds.forEach(function (k) {
        var v = r.waiting_for[k[0]];
        if (!isNum(v) || v <= 0) return;
        var rect = s("rect", { x: f.m.l + x(acc), y: yy, width: Math.max(0.5, x(v)), height: rowH - 10, fill: k[2], "class": "waitpart", "data-kind": k[0] });
        titled(rect, r.name + " · " + k[1] + ": " + fmtDur(v) + " (" + fmtPct(v / tot) + ")");
        f.svg.appendChild(rect);
        acc += v;
      });
      f.svg.appendChild(s("text", { x: f.m.l + x(acc) + 6, y: yy + 13 }, fmtDur(tot) + " of model calls"));
    });
    sec.appendChild(h("h3", { class: "sub" }, "What the model calls wait for"));
    sec.appendChild(h("div", { class: "chart waitingfor" }, f.svg));
    sec.appendChild(legendRow(kinds.map(function (k) { return { color: k[2], label: k[1] }; })));
  }

  /* ---------- slowest tools and calls ---------- */
  function renderSlow() {
    var SL = D.slow || {};
    var sec = panel("slowest", "Slowest tools and calls", "Tools by total time spent in them, and the longest single spans.");
    var tools = SL.tools || [], calls = SL.calls || [];
    if (!tools.length && !calls.length) { missing(sec, "no timed tool or model spans"); return; }
    var grid = h("div", { class: "grid2" });
    sec.appendChild(grid);
    var left = h("div"), right = h("div");
    grid.appendChild(left); grid.appendChild(right);
    left.appendChild(h("h3", { class: "sub" }, "Tools by total time"));
    if (!tools.length) left.appendChild(h("p", { class: "hint" }, "no timed tool spans"));
    else {
      var maxT = tools[0].total_s || 1, tb = h("tbody");
      tools.forEach(function (t) {
        tb.appendChild(h("tr", null, [
          h("td", { class: "name" }, t.tool), h("td", { class: "r" }, fmtInt(t.calls)), h("td", { class: "r" }, fmtDur(t.total_s)),
          h("td", { class: "barcell" }, h("div", { class: "bar", style: { width: (100 * t.total_s / maxT) + "%" } })),
          h("td", { class: "r" }, fmtDur(t.median_s)), h("td", { class: "r" }, fmtDur(t.max_s)),
          h("td", { class: "r" }, t.errors ? h("span", { class: "tag err" }, fmtInt(t.errors)) : "0"),
        ]));
      });
      left.appendChild(h("table", { class: "t" }, [h("thead", null, h("tr", null, [h("th", null, "tool"), h("th", { class: "r" }, "calls"),
        h("th", { class: "r" }, "total"), h("th", null, ""), h("th", { class: "r" }, "median"), h("th", { class: "r" }, "max"), h("th", { class: "r" }, "errors")])), tb]));
    }
    right.appendChild(h("h3", { class: "sub" }, "Longest single spans"));
    if (!calls.length) right.appendChild(h("p", { class: "hint" }, "no timed spans"));
    else {
      var tb2 = h("tbody");
      calls.forEach(function (c) {
        var tok = c.kind === "model" ? fmtTok(c.input_tokens) + " in · " + fmtTok(c.output_tokens) + " out" : "";
        tb2.appendChild(h("tr", null, [
          h("td", null, h("span", { class: "swatch", style: { background: COLOR[c.kind] }, title: c.kind })),
          h("td", { class: "name" }, [c.name, c.status === "error" ? h("span", { class: "tag err", style: { marginLeft: "6px" } }, c.error_type || "error") : null]),
          h("td", { class: "ell", title: c.session }, c.session), h("td", { class: "r" }, fmtDur(c.start_s)), h("td", { class: "r" }, fmtDur(c.dur_s)), h("td", { class: "r wrap" }, tok),
        ]));
      });
      right.appendChild(h("table", { class: "t" }, [h("thead", null, h("tr", null, [h("th", null, ""), h("th", null, "span"), h("th", null, "session"),
        h("th", { class: "r" }, "at"), h("th", { class: "r" }, "duration"), h("th", { class: "r" }, "tokens")])), tb2]));
    }
    var F = SL.failures || {};
    if (F.model_calls || F.tool_calls) {
      var part = function (kind) {
        var n = F[kind + "_calls"] || 0;
        if (!n) return null;
        var types = (F.by_error_type || []).filter(function (g) { return g.kind === kind; }).slice(0, 4)
          .map(function (g) { return fmtInt(g.count) + " " + g.error_type; }).join(", ");
        return fmtInt(n) + " " + kind + (n === 1 ? " call" : " calls") + " (" + fmtDur(F[kind + "_s"]) + (types ? ": " + types : "") + ")";
      };
      var txt = [part("model"), part("tool")].filter(function (x) { return x; }).join("; ");
      sec.appendChild(h("p", { class: "hint", id: "failures" }, "Failed: " + txt + ". Their time is part of the split above."));
    }
  }

  /* ---------- corpus view ---------- */
  function histogram(holder, metric) {
    var vals = metric.values.filter(isNum);
    var f = chartFrame(420, 200, { l: 40, r: 14, t: 34, b: 36 });
    f.svg.appendChild(s("text", { x: f.m.l, y: 13, class: "title" }, metric.label));
    if (!vals.length) { f.svg.appendChild(s("text", { x: f.m.l, y: 60 }, "no values")); holder.appendChild(h("div", { class: "chart" }, f.svg)); return; }
    var lo = Math.min.apply(null, vals), hi = Math.max.apply(null, vals);
    if (metric.unit === "share") { lo = Math.min(lo, 0); hi = Math.max(hi, 1); }
    if (!(hi > lo)) { hi = lo + 1; }
    var nb = Math.max(5, Math.min(30, Math.ceil(Math.sqrt(vals.length) * 2))), w = (hi - lo) / nb, bins = new Array(nb).fill(0);
    vals.forEach(function (v) { bins[Math.min(nb - 1, Math.floor((v - lo) / w))]++; });
    var bmax = Math.max.apply(null, bins), ystep = Math.max(1, niceStep(bmax, 3));
    var ymax = Math.ceil(bmax / ystep) * ystep;
    var x = function (v) { return (v - lo) / (hi - lo) * f.w; }, y = function (c) { return f.h - c / ymax * f.h; };
    var fmt = metric.unit === "share" ? function (v) { return (v * 100).toFixed(0) + "%"; } : metric.unit === "s" ? fmtDur : fmtTok;
    axisLeft(f, y, ticks(0, ymax, 3).filter(function (v) { return Math.round(v) === v; }), fmtInt, null);
    var xt;
    if (metric.unit === "s") {
      var st = timeStep((hi - lo) * 1e6, 4) / 1e6;
      xt = [];
      for (var tv = Math.ceil(lo / st) * st; tv <= hi + 1e-9; tv += st) xt.push(tv);
    } else xt = ticks(lo, hi, 4);
    axisBottom(f, x, xt, metric.unit === "s" ? fmtRound : fmt, null);
    bins.forEach(function (c, i) {
      if (!c) return;
      var r = s("rect", { x: f.m.l + x(lo + i * w) + 0.5, y: f.m.t + y(c), width: Math.max(1, x(lo + w) - 1), height: f.h - y(c), fill: metric.color || COLOR.model });
      titled(r, fmt(lo + i * w) + " – " + fmt(lo + (i + 1) * w) + ": " + c + " sessions");
      f.svg.appendChild(r);
    });
    var sorted = vals.slice().sort(function (a, b) { return a - b; }), med = sorted[Math.floor((sorted.length - 1) / 2)];
    var mx = f.m.l + x(med);
    f.svg.appendChild(s("line", { x1: mx, x2: mx, y1: f.m.t, y2: f.m.t + f.h, stroke: "#1c2430", "stroke-dasharray": "3 3" }));
    var right = mx > f.m.l + f.w * 0.6;
    f.svg.appendChild(s("text", { x: right ? mx - 4 : mx + 4, y: f.m.t - 4, "text-anchor": right ? "end" : "start" }, "median " + fmt(med)));
    holder.appendChild(h("div", { class: "chart" }, f.svg));
  }
  function renderCorpus() {
    var C = D.corpus;
    if (!C) return;
    var sec = panel("corpus", "Across sessions", "Distributions over the " + fmtInt(C.n_sessions) + " top-level sessions in this corpus (dashed line: median).");
    if (C.status !== "ok") { missing(sec, C.reason || "no per-session figures"); return; }
    var grid = h("div", { class: "grid3" });
    C.metrics.forEach(function (m) { histogram(grid, m); });
    sec.appendChild(grid);
  }

  /* ---------- footer ---------- */
  function renderFooter() {
    var foot = FOOT || document.getElementById("foot"), m = D.meta || {};
    var items = [];
    if (m.sources && m.sources.length) items.push("Sources: " + m.sources.slice(0, 8).join(", ") + (m.sources.length > 8 ? " and " + (m.sources.length - 8) + " more" : ""));
    if (m.tokenizer) items.push("Tokenizer: " + m.tokenizer + (m.tokenizer_exact ? " (exact)" : " (approximate)") + "; prompt blocks of " + m.block_size + " tokens.");
    var co = m.capture;
    if (co && isNum(co.total_s)) {
      var cost = "agentprof's own cost while capturing: " + fmtDur(co.total_s) + " of CPU" +
        (isNum(co.total_share_of_wall) ? " (" + (100 * co.total_share_of_wall).toFixed(2) + " % of wall)" : "");
      var more = [];
      if (isNum(co.background_cpu_s) && co.background_cpu_s > 0) {
        cost += ": " + fmtDur(co.s) + " on the agent's threads, " + fmtDur(co.background_cpu_s) + " on its background thread.";
        more.push("The background thread computes prompt fingerprints. The agent's wall time grows by between " + fmtDur(co.s) +
          " (the background work overlaps its waits on a free core) and " + fmtDur(co.total_s) + " (it holds the GIL while the agent runs Python).");
      } else {
        cost += " on the agent's threads.";
      }
      more.push("The first profile in a process includes loading agentprof's capture modules and tokenizer.");
      items.push([cost, details("capture", "How to read this", more.map(function (t) { return h("p", null, t); }))]);
    }
    var dg = D.diagnostics || {};
    if (dg.count) items.push([fmtInt(dg.count) + " input diagnostics", dg.first && dg.first.length ? details("diagnostics", "first " + dg.first.length, [h("ul", null, dg.first.map(function (t) { return h("li", null, t); }))]) : "."]);
    items.push(D.timeline && D.timeline.text ? "This report includes captured prompt and response text (opted in)." : "No prompt or response text is included in this report; only counts and hashes.");
    items.push("Generated by agentprof " + (D.version || "") + ". This file makes no network requests.");
    append(foot, h("ul", null, items.map(function (t) { return h("li", null, t); })));
  }

  /* ---------- comparison page: several traces side by side ---------- */
  var FOOT = null;  // where renderFooter writes (a trace's own footer on a comparison page)
  function fmtAs(fmt, v) {
    return fmt === "dur" ? fmtDur(v) : fmt === "pct" ? fmtPct(v) : fmt === "tok" ? fmtTok(v) : fmt === "x" ? fmtX(v) : fmtInt(v);
  }
  function renderCompareHead() {
    var C = DATA.compare, runs = C.runs || [];
    document.getElementById("subtitle").textContent = runs.length + " traces side by side" + (DATA.generated ? " · generated " + DATA.generated : "");
    var sec = panel("compare", "Side by side", "Each trace's time split, what each system does to it, and its biggest lever; its full report follows below under its label.");
    sec.appendChild(h("ul", { class: "runs" }, runs.map(function (r, i) {
      return h("li", null, [h("a", { href: "#run" + i }, h("b", null, r.label)), r.about ? h("span", { class: "muted" }, " — " + r.about) : null]);
    })));
    runs.forEach(function (r) {
      var hl = (r.payload || {}).headline || {}, t = hl.time || {}, wall = isNum(t.wall_s) ? t.wall_s : null;
      var bar = h("div", { class: "splitbar", role: "img", "aria-label": "time split of " + r.label });
      if (wall && wall > 0) KINDS.forEach(function (k) {
        var v = t[k + "_s"];
        if (!isNum(v) || v <= 0) return;
        var seg = h("div", { style: { width: (100 * v / wall) + "%", background: COLOR[k] } });
        seg.title = r.label + " · " + KIND_LABEL[k] + ": " + fmtDur(v) + " (" + fmtPct(v / wall) + ")";
        bar.appendChild(seg);
      });
      sec.appendChild(h("div", { class: "cmprow" }, [h("div", { class: "cmplabel" }, [h("b", null, r.label), h("span", { class: "muted" }, " " + fmtDur(wall))]), bar]));
    });
    sec.appendChild(legendRow(KINDS.map(function (k) { return { color: COLOR[k], label: KIND_LABEL[k] }; })));
    var W = C.whatif || [];
    if (W.length) {
      sec.appendChild(h("h3", { class: "sub" }, "Task time on each system, and the task's speed-up (its range)"));
      var wbody = W.map(function (row) {
        var name = h("td", null, row.name);
        if (row.display) name.title = row.display;
        return h("tr", null, [name].concat(row.cells.map(function (c) {
          if (!c) return h("td", { class: "r muted" }, "not replayed");
          if (c.error) return h("td", { class: "r muted" }, "not replayed: " + c.error);
          var txt = fmtDur(c.e2e_s);
          if (isNum(c.speedup) && row.name !== "recorded") txt += " · " + fmtX(c.speedup) + (c.band ? " (" + fmtX(c.band[0]) + "–" + fmtX(c.band[1]) + ")" : "");
          var td = h("td", { class: "r" }, [h("div", null, txt), c.why_not && row.name !== "recorded" ? h("div", { class: "muted small" }, c.why_not) : null]);
          if (isNum(c.model_speedup) && row.name !== "recorded") td.title = "model calls " + fmtX(c.model_speedup);
          return td;
        })));
      });
      var whead = h("tr", null, [h("th", null, "system")].concat(runs.map(function (r) { return h("th", { class: "r" }, r.label); })));
      sec.appendChild(h("table", { class: "t cmp cmp-whatif" }, [h("thead", null, whead), h("tbody", null, wbody)]));
    }
    var levers = runs.filter(function (r) { var A = (r.payload || {}).answer || {}; return A.lever || A.ceiling; });
    if (levers.length) sec.appendChild(h("ul", { class: "cmp-levers" }, levers.map(function (r) {
      var A = r.payload.answer;
      return h("li", null, [h("b", null, r.label + ": "), A.lever ? "biggest lever: " + A.lever.text + ". " : "",
        A.ceiling ? A.ceiling.text.charAt(0).toUpperCase() + A.ceiling.text.slice(1) + "." : ""]);
    })));
    var head = h("tr", null, [h("th", null, "")].concat(runs.map(function (r) { return h("th", { class: "r" }, r.label); })));
    var body = (C.table || []).map(function (row) {
      return h("tr", null, [h("td", null, row.label)].concat(row.values.map(function (v) { return h("td", { class: "r" }, fmtAs(row.fmt, v)); })));
    });
    sec.appendChild(h("h3", { class: "sub" }, "Headline figures"));
    sec.appendChild(h("table", { class: "t cmp" }, [h("thead", null, head), h("tbody", null, body)]));
    if (C.notes && C.notes.length) { var cn = details("", "About these figures (" + C.notes.length + (C.notes.length === 1 ? " note)" : " notes)"), [h("ul", null, uniq(C.notes).map(function (n) { return h("li", null, n); }))]); cn.id = "compare-notes"; sec.appendChild(cn); }
  }
  function renderTrace() {
    guard("headline", renderHeadline);
    guard("missing-data", renderMissing);
    guard("timeline", renderTimeline);
    guard("redundancy", renderRedundancy);
    guard("cache", renderCache);
    guard("what-if", renderWhatIf);
    guard("measured", renderMeasured);
    guard("serving", renderServing);
    guard("slowest", renderSlow);
    guard("corpus", renderCorpus);
  }
  function renderCompare() {
    guard("comparison", renderCompareHead);
    var main = app;
    (DATA.compare.runs || []).forEach(function (r, i) {
      var box = h("div", { class: "run", id: "run" + i });
      var m = (r.payload || {}).meta || {}, hl = (r.payload || {}).headline || {};
      var bits = [];
      if (m.source_format) bits.push(m.source_format);
      if (isNum(hl.model_calls)) bits.push(fmtInt(hl.model_calls) + " model calls");
      box.appendChild(h("div", { class: "runhead" }, [h("h2", null, r.label), h("p", { class: "muted" }, bits.join(" · "))]));
      main.appendChild(box);
      toc.appendChild(h("span", { class: "tocgroup" }, h("a", { href: "#run" + i }, r.label + ":")));
      app = box; PRE = "run" + i + "-"; D = r.payload || {}; FOOT = h("div", { class: "foot" });
      renderTrace();
      guard("footer", renderFooter);
      box.appendChild(FOOT);
    });
    app = main; PRE = ""; D = DATA; FOOT = null;
  }

  if (DATA.compare) {
    renderCompare();
  } else if (DATA.page === "loadtest") {
    renderHeader();
    guard("measured", renderMeasured);
    guard("footer", renderFooter);
  } else {
    renderHeader();
    renderTrace();
    guard("footer", renderFooter);
  }
  document.documentElement.setAttribute("data-rendered", "1");
})();
