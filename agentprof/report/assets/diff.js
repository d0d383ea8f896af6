/* agentprof diff page: BASE and NEW side by side with the tested changes. Every text from the data is inserted
   as a text node (textContent / createTextNode), never parsed as HTML; nothing is fetched. */
(function () {
  "use strict";

  var DATA = JSON.parse(document.getElementById("agentprof-data").textContent);
  var D = DATA.diff;
  var BUCKETS = ["model_s", "tool_s", "parse_s", "orchestration_s"];

  function h(tag, attrs, kids) {
    var el = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (v === undefined || v === null || v === false) return;
      if (k === "style") Object.assign(el.style, v);
      else el.setAttribute(k, v === true ? "" : String(v));
    });
    if (kids === undefined || kids === null) return el;
    (Array.isArray(kids) ? kids : [kids]).forEach(function (c) {
      if (c === undefined || c === null || c === false) return;
      el.appendChild(c instanceof Node ? c : document.createTextNode(agentprofWhole(String(c))));  // figures.js
    });
    return el;
  }

  function fmt(unit, v) {
    if (v === null || v === undefined || !isFinite(v)) return "–";
    if (unit === "s") return Math.abs(v) < 1 ? (v * 1e3).toFixed(1) + " ms" : v.toFixed(2) + " s";
    if (unit === "share") return (v * 100).toFixed(1) + "%";
    if (unit === "tokens/s") return Math.round(v).toLocaleString("en-US") + " tok/s";
    return (Number.isInteger(v) || Math.abs(v) >= 100) ? Math.round(v).toLocaleString("en-US") : v.toFixed(1);
  }

  // worse: NEW is slower or reuses less; better: the opposite; "" when not a speed or reuse figure
  function direction(c) {
    if (c.ratio === null || c.ratio === undefined) return "";
    var speed = c.value_unit === "s" && !(c.metric === "wait_s" && /^wait:(user|user_turn|permission|approval|idle|think|unrecorded)$/.test(c.scope));
    if (speed) return c.ratio > 1 ? "worse" : c.ratio < 1 ? "better" : "";
    if (c.metric === "output_tokens_per_s" || c.value_unit === "share") return c.ratio < 1 ? "worse" : c.ratio > 1 ? "better" : "";
    return "";
  }

  function panel(id, title, lede, body) {
    return h("section", { "class": "panel", id: id }, [h("h2", null, title), lede ? h("p", { "class": "lede" }, lede) : null].concat(body));
  }

  function sidesCards() {
    return h("div", { "class": "cards" }, ["base", "new"].map(function (k) {
      var s = D[k] || {};
      return h("div", { "class": "card side-" + k }, [
        h("div", { "class": "k" }, k.toUpperCase()),
        h("div", { "class": "v", title: s.label }, s.label),
        h("div", { "class": "s" }, (s.runs || 0) + " run(s), " + (s.model_calls || 0) + " model calls, " +
          (s.files || 0) + " file(s), " + (s.misses || 0) + " cache misses")]);
    }));
  }

  function failedBox() {
    var f = D.failed || [];
    if (!f.length) return null;
    return h("div", { "class": "callout fail", id: "failed" }, [h("h3", null, f.length + " failing figure" + (f.length > 1 ? "s" : "")),
      h("ul", null, f.map(function (x) { return h("li", null, x.line); }))]);
  }

  // paired bars: one row per time figure, BASE above NEW, on one scale
  function pairedBars() {
    var rows = D.changes.filter(function (c) {
      return c.scope === "task" && (c.metric === "wall_s" || c.metric === "agent_active_s" || BUCKETS.indexOf(c.metric) >= 0);
    }).concat(D.changes.filter(function (c) { return c.metric === "wait_s" || c.metric === "tool_time_s"; }));
    var max = 0;
    rows.forEach(function (c) { max = Math.max(max, c.base || 0, c.new || 0); });
    var box = h("div", { "class": "pairs", id: "pairs" });
    rows.forEach(function (c) {
      var name = c.label + (c.scope !== "task" ? " · " + c.scope.replace(/^(tool|wait):/, "") : "");
      var cls = "pair" + (c.significant ? " sig " + direction(c) : "");
      box.appendChild(h("div", { "class": cls }, [
        h("div", { "class": "pname" }, name),
        h("div", { "class": "bars" }, ["base", "new"].map(function (k) {
          var v = c[k] || 0;
          return h("div", { "class": "bar-row" }, [
            h("span", { "class": "bar " + k, style: { width: (max > 0 ? (100 * v / max) : 0).toFixed(2) + "%" } }),
            h("span", { "class": "bv" }, k + " " + fmt(c.value_unit, c[k]))]);
        }))]));
    });
    return box;
  }

  function changesTable() {
    var t = h("table", { "class": "t", id: "changes" });
    t.appendChild(h("thead", null, h("tr", null, ["figure", "scope", "base", "new", "ratio", "p (adjusted)", "across", "load explains", "significant"].map(function (c, i) {
      return h("th", { "class": (i >= 2 && i <= 5) || i === 7 ? "r" : null }, c);
    }))));
    var tb = h("tbody");
    D.changes.forEach(function (c) {
      var tr = h("tr", { "class": c.significant ? "sig " + direction(c) : null, "data-metric": c.metric, "data-scope": c.scope }, [
        h("td", null, c.per_call ? c.name : c.label), h("td", { "class": "name" }, c.scope),
        h("td", { "class": "r" }, fmt(c.value_unit, c.base)), h("td", { "class": "r" }, fmt(c.value_unit, c.new)),
        h("td", { "class": "r" }, c.ratio === null ? "–" : "×" + c.ratio.toFixed(2)),
        h("td", { "class": "r" }, c.p_adjusted === null ? "–" : c.p_adjusted.toPrecision(2)),
        h("td", null, c.tested_across && !c.threshold_only ? c.n_base + " vs " + c.n_new + " " + c.tested_across +
          (c.per_call ? " (" + c.runs_base + " vs " + c.runs_new + " runs)" : "")
          : (c.note || "not tested")),
        h("td", { "class": "r load" }, c.load_share === null ? "–" : Math.round(c.load_share * 100) + "%" +
          (c.load_explains_s_per_run === null ? "" : " (" + fmt("s", c.load_explains_s_per_run) + " a run)")),
        h("td", { "class": "flag" }, c.significant ? "yes" : (c.p_adjusted === null ? "–" : "no"))]);
      tb.appendChild(tr);
    });
    t.appendChild(tb);
    return t;
  }

  function missCauses() {
    var m = D.new_miss_causes || [];
    if (!m.length) return [h("p", { "class": "muted" }, "No cache-miss cause appears in NEW that BASE does not have.")];
    return m.map(function (c) {
      return h("div", { "class": "cause" }, [
        h("h3", null, [h("code", null, c.cause), " — " + c.misses + " miss" + (c.misses > 1 ? "es" : "")]),
        h("ul", null, c.examples.map(function (e) {
          return h("li", null, e.session_id + " call " + e.call + (e.where ? " (" + e.where + ")" : "") + ": " + e.detail);
        })),
        c.fix ? h("p", null, [h("b", null, "fix: "), c.fix]) : null]);
    });
  }

  var app = document.getElementById("app");
  var m = D.method || {};
  document.getElementById("subtitle").textContent = "BASE " + (D.base.label || "") + " · NEW " + (D.new.label || "") + " · " + DATA.generated;
  app.appendChild(sidesCards());
  var fb = failedBox();
  if (fb) app.appendChild(fb);
  (D.notes || []).forEach(function (n) { app.appendChild(h("p", { "class": "callout" }, n)); });
  app.appendChild(panel("side-by-side", "Side by side", "Median run of each side. Highlighted: significant changes (red: slower, green: faster).", [pairedBars()]));
  var sig = D.changes.filter(function (c) { return c.significant; }).length;
  app.appendChild(panel("changes-panel", "Changes (" + sig + " significant)",
    "Tests: " + m.summary + ". Values: " + m.values + ". Per-call figures (a tool's or model's calls, gaps) decide with one run a side; per-run figures need several runs.", [changesTable()]));
  app.appendChild(panel("miss-causes", "Cache-miss causes only in NEW", "Top-ranked causes of NEW's cache misses that explain no miss in BASE.", missCauses()));
  document.getElementById("foot").textContent = "agentprof " + DATA.version + " · definitions: docs/DIFF.md";
  document.documentElement.setAttribute("data-rendered", "");
})();
